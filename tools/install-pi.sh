#!/usr/bin/env bash
# Install frame on a Raspberry Pi (64-bit Raspberry Pi OS, bookworm or trixie) as a systemd service.
#
#   sudo tools/install-pi.sh [--dry-run] [--panel NAME] [--no-plots]
#
# From a clone of the repository. Idempotent: every step first looks at what is there and changes
# only what differs, so a second run changes nothing (and says so). --dry-run prints every step and
# what it would do, changing nothing. --panel sets display.panel in a new /etc/frame/config.yaml
# (inky also enables I2C and spi0-0cs). --no-plots leaves out matplotlib and what only it needs
# (see docs/benchmarks-pi.md, "Footprint on the Pi"): the taste model's explanation plot is then skipped. Steps:
#   checks   root, 64-bit, the repository's files
#   spi      SPI (and for Inky: I2C and spi0-0cs) enabled in config.txt; reboot needed if just enabled
#   wifi     Wi-Fi power saving off for good (NetworkManager conf, or a systemd unit without NM)
#   user     system user 'frame' in the spi and gpio groups (and i2c for Inky)
#   venv     /opt/frame from requirements-pi.txt: wheels only, hashes checked, nothing compiles
#   config   /etc/frame/config.yaml (kept if it exists)
#   state    /var/lib/frame owned by the service user; then 'frame config check' as that user (the check
#            keeps the model's plan and this machine's measurement there, which the daemon updates later)
#   service  the unit from 'frame install-service', enabled and (re)started when it or frame changed
#   status   'frame status'
# FRAME_ROOT (tests only) prefixes every file path, so the script can run against a temporary root.
set -euo pipefail

ROOT="${FRAME_ROOT:-}"
STATUS_TRIES="${FRAME_STATUS_TRIES:-20}"
STATUS_WAIT="${FRAME_STATUS_WAIT:-3}"
# frame reads every FRAME_* variable as a configuration override ('frame config check' below would refuse
# these unknown keys): they are the installer's own, so they stop here
unset FRAME_ROOT FRAME_STATUS_TRIES FRAME_STATUS_WAIT
REPO="$(cd "$(dirname "$0")/.." && pwd)"
VENV=/opt/frame
USER_NAME=frame
STATE=/var/lib/frame
CONFIG=/etc/frame/config.yaml
UNIT=/etc/systemd/system/frame.service
DRY_RUN=0
PANEL=""
NO_PLOTS=0
CHANGES=0
REBOOT=0
RESTART=0

usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY_RUN=1 ;;
        --panel) PANEL="${2:?--panel needs a panel name}"; shift ;;
        --panel=*) PANEL="${1#--panel=}" ;;
        --no-plots) NO_PLOTS=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "install-pi: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

step() { echo "== $*"; }
ok() { echo "   ok: $*"; }
die() { echo "install-pi: $*" >&2; exit 1; }

# A change: printed always, carried out unless --dry-run.
change() {
    CHANGES=$((CHANGES + 1))
    if [ "$DRY_RUN" = 1 ]; then echo "   would run: $*"; else echo "   + $*"; "$@"; fi
}

# Write CONTENT to PATH (mode MODE, group GROUP) unless it already holds exactly that.
ensure_file() {
    local path="$1" mode="$2" group="$3" content="$4"
    if [ -f "$ROOT$path" ] && [ "$(cat "$ROOT$path")" = "$content" ] \
        && [ "$(stat -c %a:%G "$ROOT$path")" = "$mode:$group" ]; then
        ok "$path"
        return 1
    fi
    CHANGES=$((CHANGES + 1))
    if [ "$DRY_RUN" = 1 ]; then echo "   would write: $path"; return 0; fi
    echo "   + write $path"
    mkdir -p "$(dirname "$ROOT$path")"
    printf '%s\n' "$content" > "$ROOT$path.frame-new"
    chmod "$mode" "$ROOT$path.frame-new"
    chgrp "$group" "$ROOT$path.frame-new"
    mv "$ROOT$path.frame-new" "$ROOT$path"
}

# A directory with owner:group and mode.
ensure_dir() {
    local path="$1" owner="$2" mode="$3"
    if [ -d "$ROOT$path" ] && [ "$(stat -c %U:%G:%a "$ROOT$path")" = "$owner:$mode" ]; then
        ok "$path"
        return
    fi
    if [ ! -d "$ROOT$path" ]; then change mkdir -p "$ROOT$path"; fi
    change chown "$owner" "$ROOT$path"
    change chmod "$mode" "$ROOT$path"
}

in_group() { id -nG "$1" 2>/dev/null | tr ' ' '\n' | grep -qx "$2"; }

source_stamp() {  # what is being installed: the lock and frame's own files
    (cd "$REPO" && find requirements-pi.txt setup.cfg pyproject.toml frame -type f ! -name '*.pyc' -print0 \
        | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

# ------------------------------------------------------------------------------------------------
step checks
if [ "$DRY_RUN" = 0 ] && [ "$(id -u)" != 0 ]; then die "run as root: sudo $0 $*"; fi
ARCH=$(uname -m)
if [ "$ARCH" != aarch64 ]; then
    # a dry run changes nothing, so it may show the steps on any machine (a laptop, CI); a real run may not
    [ "$DRY_RUN" = 1 ] || die "needs 64-bit Raspberry Pi OS (aarch64); this is $ARCH"
    echo "   note: this is $ARCH, not 64-bit Raspberry Pi OS (aarch64): a real run refuses here; the dry run goes on"
fi
for file in requirements-pi.txt config.yaml setup.cfg; do
    [ -f "$REPO/$file" ] || die "$REPO/$file is missing: run this from a clone of the repository"
done
ok "$([ "$DRY_RUN" = 1 ] && echo "dry run" || echo root), $ARCH, repository at $REPO"

step spi
BOOT_CONFIG=/boot/firmware/config.txt
[ -f "$ROOT$BOOT_CONFIG" ] || [ ! -f "$ROOT/boot/config.txt" ] || BOOT_CONFIG=/boot/config.txt
boot_lines=("dtparam=spi=on")
if [ "$PANEL" = inky ]; then boot_lines+=("dtparam=i2c_arm=on" "dtoverlay=spi0-0cs"); fi
for line in "${boot_lines[@]}"; do
    if [ -f "$ROOT$BOOT_CONFIG" ] && grep -qx "$line" "$ROOT$BOOT_CONFIG"; then
        ok "$line in $BOOT_CONFIG"
    else
        CHANGES=$((CHANGES + 1))
        REBOOT=1
        if [ "$DRY_RUN" = 1 ]; then echo "   would add: $line to $BOOT_CONFIG"; else
            echo "   + add $line to $BOOT_CONFIG"
            mkdir -p "$(dirname "$ROOT$BOOT_CONFIG")"
            echo "$line" >> "$ROOT$BOOT_CONFIG"
        fi
    fi
done
if [ -e "$ROOT/dev/spidev0.0" ]; then ok "/dev/spidev0.0 is there"; else REBOOT=1; echo "   SPI starts after a reboot"; fi

step wifi
if [ -d "$ROOT/etc/NetworkManager" ]; then
    # NetworkManager (bookworm and later) applies wifi.powersave when a connection comes up; 2 = off.
    if ensure_file /etc/NetworkManager/conf.d/frame-wifi-powersave.conf 644 root \
        "$(printf '# frame: Wi-Fi power saving stalls long renders and the phone page.\n[connection]\nwifi.powersave = 2')"; then
        change systemctl reload NetworkManager
        if [ -e "$ROOT/sys/class/net/wlan0" ]; then change iw dev wlan0 set power_save off; fi
    fi
else
    if ensure_file /etc/systemd/system/frame-wifi-powersave.service 644 root "$(printf '%s\n' \
        "[Unit]" "Description=Wi-Fi power saving off (frame)" \
        "After=sys-subsystem-net-devices-wlan0.device" "BindsTo=sys-subsystem-net-devices-wlan0.device" \
        "[Service]" "Type=oneshot" "ExecStart=/usr/sbin/iw dev wlan0 set power_save off" \
        "[Install]" "WantedBy=sys-subsystem-net-devices-wlan0.device")"; then
        change systemctl daemon-reload
        # enable and start as two steps (not --now): offline (the Pi twin's chroot, SYSTEMD_OFFLINE=1)
        # enable still writes its symlink and start is skipped, where --now fails; on a Pi it is the same
        change systemctl enable frame-wifi-powersave.service
        change systemctl start frame-wifi-powersave.service
    fi
fi

step user
if getent passwd "$USER_NAME" >/dev/null; then ok "user $USER_NAME"; else
    change useradd --system --user-group --home-dir "$STATE" --shell /usr/sbin/nologin "$USER_NAME"
fi
groups=(spi gpio)
if [ "$PANEL" = inky ]; then groups+=(i2c); fi
for group in "${groups[@]}"; do
    if ! getent group "$group" >/dev/null; then echo "   warning: no group $group on this system"; continue; fi
    if in_group "$USER_NAME" "$group"; then ok "$USER_NAME in $group"; else change usermod -aG "$group" "$USER_NAME"; fi
done

step venv
if [ -x "$ROOT$VENV/bin/python" ]; then ok "$VENV"; else change python3 -m venv "$ROOT$VENV"; fi
stamp="$(source_stamp) no-plots=$NO_PLOTS"
requirements="$REPO/requirements-pi.txt"
read -r -a plots_only <<< "$(sed -n 's/^# plots-only: //p' "$requirements")"
if [ "$NO_PLOTS" = 1 ]; then  # the lock without the plot's packages (entries span their --hash lines)
    requirements="$(mktemp)"
    trap 'rm -f "$requirements"' EXIT
    awk -v skip=" ${plots_only[*]} " '/^#/ { print; next }
        /^[^ ]/ { name = $1; sub(/==.*/, "", name); drop = index(skip, " " name " ") > 0 }
        !drop' "$REPO/requirements-pi.txt" > "$requirements"
fi
if [ -f "$ROOT$VENV/.frame-installed" ] && [ "$(cat "$ROOT$VENV/.frame-installed")" = "$stamp" ]; then
    ok "frame and its dependencies are this checkout's"
else
    if [ "$NO_PLOTS" = 1 ] && compgen -G "$ROOT$VENV/lib/python3*/site-packages/matplotlib" >/dev/null; then
        change "$ROOT$VENV/bin/pip" uninstall --quiet --yes "${plots_only[@]}"
    fi
    change "$ROOT$VENV/bin/pip" install --quiet --no-deps --require-hashes -r "$requirements"
    change "$ROOT$VENV/bin/pip" install --quiet --no-deps "$REPO"
    if [ "$DRY_RUN" = 0 ]; then echo "$stamp" > "$ROOT$VENV/.frame-installed"; fi
    RESTART=1
fi

step config
ensure_dir /etc/frame root:"$USER_NAME" 750
if [ -f "$ROOT$CONFIG" ]; then ok "$CONFIG (yours: kept as it is)"; else
    config_text="$(sed -e "s|^state_dir: .*|state_dir: $STATE|" "$REPO/config.yaml")"
    if [ -n "$PANEL" ]; then config_text="$(printf '%s\n' "$config_text" | sed -e "s|^  panel: .*|  panel: $PANEL|")"; fi
    ensure_file "$CONFIG" 640 "$USER_NAME" "$config_text" || true
    RESTART=1
fi

step state
ensure_dir "$STATE" "$USER_NAME:$USER_NAME" 750
if [ "$DRY_RUN" = 1 ] && { [ ! -x "$ROOT$VENV/bin/frame" ] || [ ! -f "$ROOT$CONFIG" ]; }; then
    echo "   would check: frame config check $CONFIG"
else
    # as the service user, once the state folder is there: the check loads the model and keeps its plan in
    # STATE/model-plans; as root it left that folder owned by root, and the daemon could never keep another
    # plan there (met in the Pi twin: the text encoder's and the VAE's were planned afresh every night)
    runuser -u "$USER_NAME" -- "$ROOT$VENV/bin/frame" config check "$ROOT$CONFIG" >/dev/null \
        || die "$CONFIG has problems (above): fix them and run this again"
    ok "frame config check $CONFIG"
fi

step service
if [ -x "$ROOT$VENV/bin/frame" ]; then
    unit_text="$("$ROOT$VENV/bin/frame" install-service --print --user "$USER_NAME")"
    if ensure_file "$UNIT" 644 root "$unit_text"; then change systemctl daemon-reload; RESTART=1; fi
else  # dry run before the venv exists
    CHANGES=$((CHANGES + 2))
    echo "   would write: $UNIT"
    echo "   would run: systemctl daemon-reload"
fi
if systemctl is-enabled --quiet frame 2>/dev/null; then ok "frame.service enabled"; else change systemctl enable frame; fi
if ! systemctl is-active --quiet frame 2>/dev/null; then change systemctl start frame
elif [ "$RESTART" = 1 ]; then change systemctl restart frame
else ok "frame.service running"; fi

step status
if [ "$DRY_RUN" = 1 ]; then echo "   would check: frame status"; else
    answered=0
    for _ in $(seq 1 "$STATUS_TRIES"); do  # the daemon needs a few seconds to start
        # as the service user: when the daemon is not up yet, 'frame status' opens the store itself, and
        # as root it would create /var/lib/frame/frame.db owned by root, which the daemon cannot write
        if runuser -u "$USER_NAME" -- "$ROOT$VENV/bin/frame" status; then answered=1; break; fi
        sleep "$STATUS_WAIT"
    done
    [ "$answered" = 1 ] || echo "   frame status did not answer yet: see journalctl -u frame -e"
fi

echo
if [ "$CHANGES" = 0 ]; then echo "nothing to change: frame is installed and running"
elif [ "$DRY_RUN" = 1 ]; then echo "$CHANGES changes to make (dry run: nothing was changed)"
else echo "$CHANGES changes made"; fi
if [ "$REBOOT" = 1 ]; then echo "SPI is enabled from the next boot: sudo reboot"; fi
echo "logs: journalctl -u frame -f    phone page: http://$(uname -n).local:8080/ (token: sudo -u $USER_NAME $VENV/bin/frame token)"
