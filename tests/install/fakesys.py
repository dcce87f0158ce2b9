"""Stand-ins for the system commands tools/install-pi.sh calls, for running it against a temporary root.

``install_stubs(bin_dir, state_dir)`` writes one executable per command into ``bin_dir`` (put first on
PATH); each runs this file as ``fakesys.py NAME ARGS...``. State lives in ``state_dir/state.json``
(users, groups, file owners by inode, systemd units) and every call is appended to ``state_dir/calls.jsonl``,
so tests can assert which commands ran, in what order, and that a second run changes nothing.
Environment knobs: FAKESYS_UID (``id -u``), FAKESYS_ARCH (``uname -m``), FAKESYS_CONFIG_CHECK (exit
status of ``frame config check``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

COMMANDS = ("id", "uname", "getent", "useradd", "usermod", "chown", "chgrp", "stat", "systemctl", "iw",
            "python3", "runuser")
UNIT_TEXT = "[Unit]\nDescription=frame (fake install-service)\n"


def install_stubs(bin_dir: Path, state_dir: Path) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "state.json").write_text(json.dumps({
        "users": {"root": ["root"]}, "groups": ["root", "spi", "gpio", "i2c"], "owners": {},
        "enabled": [], "active": []}))
    for name in COMMANDS:
        _stub(bin_dir / name, state_dir, name)


def _stub(path: Path, state_dir: Path, name: str) -> None:
    path.write_text(f'#!/bin/sh\nFAKESYS_STATE="{state_dir}" exec "{sys.executable}" -S "{__file__}" {name} "$@"\n')
    path.chmod(0o755)


def calls(state_dir: Path) -> list[list[str]]:
    log = state_dir / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def main(argv: list[str]) -> int:
    state_dir = Path(os.environ["FAKESYS_STATE"])
    name, args = argv[0], argv[1:]
    with open(state_dir / "calls.jsonl", "a") as log:
        log.write(json.dumps([name, *args]) + "\n")
    state = json.loads((state_dir / "state.json").read_text())
    status = COMMAND_TABLE[name](args, state, state_dir)
    (state_dir / "state.json").write_text(json.dumps(state))
    return status


def _id(args, state, _):
    if args == ["-u"]:
        print(os.environ.get("FAKESYS_UID", "0"))
        return 0
    if args[:1] == ["-nG"]:
        if args[1] not in state["users"]:
            return 1
        print(" ".join(state["users"][args[1]]))
        return 0
    raise SystemExit(f"fake id: unexpected {args}")


def _uname(args, *_):
    print(os.environ.get("FAKESYS_ARCH", "aarch64") if args == ["-m"] else "Linux")
    return 0


def _getent(args, state, _):
    database, key = args
    if database == "passwd":
        return 0 if key in state["users"] else 2
    return 0 if key in state["groups"] else 2


def _useradd(args, state, _):
    user = args[-1]
    assert "--system" in args and user not in state["users"], args
    state["users"][user] = [user]
    state["groups"].append(user)
    return 0


def _usermod(args, state, _):
    assert args[0] == "-aG", args
    group, user = args[1], args[2]
    if group not in state["users"][user]:
        state["users"][user].append(group)
    return 0


def _inode(path: str) -> str:
    """Owners are kept per inode, so they follow a file through ``mv`` as real ownership does."""
    return str(os.stat(path).st_ino)


def _chown(args, state, _):
    owner, path = args
    user, _, group = owner.partition(":")
    state["owners"][_inode(path)] = [user, group or user]
    return 0


def _chgrp(args, state, _):
    group, path = args
    user = state["owners"].get(_inode(path), ["root", "root"])[0]
    state["owners"][_inode(path)] = [user, group]
    return 0


def _stat(args, state, _):
    assert args[0] == "-c", args
    fmt, path = args[1], args[2]
    user, group = state["owners"].get(_inode(path), ["root", "root"])
    mode = format(os.stat(path).st_mode & 0o7777, "o")
    print(fmt.replace("%U", user).replace("%G", group).replace("%a", mode))
    return 0


def _systemctl(args, state, _):
    quiet = [a for a in args if a != "--quiet"]
    verb, units = quiet[0], [u.removesuffix(".service") for u in quiet[1:] if not u.startswith("--")]
    if verb == "is-enabled":
        return 0 if units[0] in state["enabled"] else 1
    if verb == "is-active":
        return 0 if units[0] in state["active"] else 3
    if verb == "enable":
        state["enabled"] += [u for u in units if u not in state["enabled"]]
        if "--now" in quiet:
            state["active"] += [u for u in units if u not in state["active"]]
    if verb in ("start", "restart"):
        state["active"] += [u for u in units if u not in state["active"]]
    return 0


def _runuser(args, state, _):
    """``runuser -u USER -- COMMAND...``: the user must exist; runs COMMAND (a stub) with FAKESYS_USER set."""
    assert args[0] == "-u" and args[2] == "--", args
    if args[1] not in state["users"]:
        print(f"runuser: user {args[1]} does not exist", file=sys.stderr)
        return 1
    return subprocess.call(args[3:], env={**os.environ, "FAKESYS_USER": args[1]})


def _iw(args, *_):
    return 0


def _python3(args, state, state_dir):
    """Only ``python3 -m venv DIR``: a fake venv whose python, pip and frame are stubs too."""
    assert args[:2] == ["-m", "venv"], args
    bin_dir = Path(args[2]) / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "pip", "frame"):
        _stub(bin_dir / name, state_dir, name)
    return 0


def _pip(args, state, state_dir):
    """Records the requirements file it was handed (the install script may pass a filtered temporary)."""
    if "-r" in args:
        (state_dir / "requirements-seen.txt").write_text(Path(args[args.index("-r") + 1]).read_text())
    return 0


# frame reads FRAME_* variables as configuration overrides and refuses unknown keys, as the real one did
# with the installer's own variables ("status_tries: unknown key (from environment variable ...)")
INSTALLER_VARIABLES = ("FRAME_ROOT", "FRAME_STATUS_TRIES", "FRAME_STATUS_WAIT")


def _frame(args, *_):
    leaked = [name for name in INSTALLER_VARIABLES if name in os.environ]
    if leaked:
        print(f"frame: error: unknown keys from environment variables {', '.join(leaked)}", file=sys.stderr)
        return 2
    if args[:2] == ["config", "check"]:
        if os.environ.get("FAKESYS_USER") != "frame":  # as root it keeps the model's plan in a root-owned folder
            print("frame: config check ran as root: STATE/model-plans would be root's", file=sys.stderr)
            return 3
        return int(os.environ.get("FAKESYS_CONFIG_CHECK", "0"))
    if args[:1] == ["install-service"]:
        assert "--print" in args
        sys.stdout.write(UNIT_TEXT)
        return 0
    if args == ["status"]:
        if os.environ.get("FAKESYS_USER") != "frame":  # as root it could create the store owned by root
            print("fake frame: status run as root", file=sys.stderr)
            return 1
        print("frame: running (fake status)")
        return 0
    raise SystemExit(f"fake frame: unexpected {args}")


COMMAND_TABLE = {"id": _id, "uname": _uname, "getent": _getent, "useradd": _useradd, "usermod": _usermod,
                 "chown": _chown, "chgrp": _chgrp, "stat": _stat, "systemctl": _systemctl, "iw": _iw,
                 "python3": _python3, "python": _python3, "pip": _pip, "frame": _frame, "runuser": _runuser}

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
