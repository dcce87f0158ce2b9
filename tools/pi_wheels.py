"""What a Raspberry Pi would install: frame's Pi requirements resolved to aarch64 wheels, never sdists.

    python tools/pi_wheels.py check            # exit 1 naming every package that would compile on a Pi
    python tools/pi_wheels.py lock             # rewrite requirements-pi.txt (pins + sha256 of each wheel)
    python tools/pi_wheels.py download DIR     # the locked wheels for 3.11 into DIR (for measuring)

The requirements are ``install_requires`` plus the extras meant for the Pi (``PI_EXTRAS``), read from
setup.cfg. ``pip download --only-binary=:all:`` for the Pi's platform refuses every source
distribution, so anything that would compile on the Pi fails the resolution. Two details make the
resolution the Pi's and not this machine's:

* pip 23 (Raspberry Pi OS bookworm's) matches ``--platform`` tags exactly, while a Pi accepts every
  manylinux tag up to its glibc; we pass ``manylinux_2_28_aarch64`` and each older tag (a wheel built
  for an older glibc is what most projects ship), so no wheel the Pi could use is missed.
* pip evaluates environment markers (``python_version``, ``platform_machine``) against the
  interpreter running pip, not against ``--python-version``; the pip child here gets the Pi's marker
  environment, so ``; python_version >= "3.13"`` or ``; platform_machine == "aarch64"`` count.

``NO_DEPS`` packages are installed without their declared dependencies: Pimoroni's inky declares
spidev (a source distribution only), and frame gives inky its own ioctl SPI instead
(``frame.display.spidev_compat``). The lock is installed with ``pip install --no-deps
--require-hashes -r requirements-pi.txt``, then frame itself with ``--no-deps``.
"""

from __future__ import annotations

import argparse
import configparser
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements-pi.txt"
PI_EXTRAS = ("pi", "inky", "buttons")
NO_DEPS = {"inky>=2.0": "spidev: a source distribution only; frame gives inky ioctl SPI"}
# The lighter path: what the explanation plot alone costs (tools/install-pi.sh --no-plots leaves it out;
# the night runs on without the plot, see frame/worker/choose.py).
PLOTS = "matplotlib"
# Raspberry Pi OS bookworm ships CPython 3.11.2, trixie 3.13.5 (both 64-bit, aarch64).
PYTHONS = {"3.11": "3.11.2", "3.13": "3.13.5"}
PLATFORMS = ("manylinux_2_28_aarch64", *(f"manylinux_2_{minor}_aarch64" for minor in range(27, 16, -1)),
             "manylinux2014_aarch64")

_PIP_WITH_PI_MARKERS = """
import json, sys
from pip._vendor.packaging import markers
pi = json.loads(sys.argv[1])
host = markers.default_environment
markers.default_environment = lambda: {**host(), **pi}
from pip._internal.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def marker_environment(python: str) -> dict[str, str]:
    """The environment markers of a Raspberry Pi running CPython ``python`` (e.g. "3.13")."""
    full = PYTHONS[python]
    return {"python_version": python, "python_full_version": full, "implementation_name": "cpython",
            "implementation_version": full, "platform_python_implementation": "CPython",
            "platform_machine": "aarch64", "platform_system": "Linux", "sys_platform": "linux",
            "os_name": "posix", "platform_release": "6.12.0+rpt-rpi-v8"}


def _lines(value: str) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in value.splitlines() if line.split("#", 1)[0].strip()]


def pi_requirements(setup_cfg: Path = ROOT / "setup.cfg") -> list[str]:
    """``install_requires`` plus the ``PI_EXTRAS`` extras, in setup.cfg's order, without duplicates."""
    config = configparser.ConfigParser()
    config.read(setup_cfg)
    requirements = _lines(config["options"]["install_requires"])
    for extra in PI_EXTRAS:
        requirements += _lines(config["options.extras_require"][extra])
    return list(dict.fromkeys(requirements))


def pip_download(requirements: list[str], python: str, dest: Path, *, no_deps: bool = False,
                 extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``pip download`` of aarch64 wheels only, for CPython ``python``, with the Pi's markers."""
    command = [sys.executable, "-c", _PIP_WITH_PI_MARKERS, json.dumps(marker_environment(python)), "download",
               "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
               *(arg for platform in PLATFORMS for arg in ("--platform", platform)),
               "--dest", str(dest), "--progress-bar", "off", "--disable-pip-version-check",
               *(["--no-deps"] if no_deps else []), *extra, *requirements]
    return subprocess.run(command, capture_output=True, text=True)


_UNSATISFIED = re.compile(r"satisfies the requirement ([A-Za-z0-9_.\-]+)")


@dataclass
class Resolution:
    python: str
    wheels: list[Path] = field(default_factory=list)
    would_compile: list[str] = field(default_factory=list)  # "name: why" for each package without a wheel
    log: str = ""


def resolve(python: str, dest: Path, requirements: list[str] | None = None) -> Resolution:
    """Resolve the Pi requirements (+ ``NO_DEPS`` packages alone) to wheels in ``dest``.

    When the whole set fails, each requirement is tried alone (without dependencies) so every
    top-level package lacking a wheel is named, plus the dependency pip stopped at.
    """
    requirements = pi_requirements() if requirements is None else requirements
    result = Resolution(python)
    for group, no_deps in ((requirements, False), (list(NO_DEPS), True)):
        done = pip_download(group, python, dest, no_deps=no_deps)
        result.log += done.stdout + done.stderr
        if done.returncode == 0:
            continue
        names = {match.lower() for match in _UNSATISFIED.findall(done.stderr)}
        with tempfile.TemporaryDirectory(prefix="frame-pi-walk-") as scratch:
            names |= _without_wheels(group if not no_deps else [], python, Path(scratch))
        if no_deps:
            names |= {_name(r) for r in group if pip_download([r], python, dest, no_deps=True).returncode}
        for name in sorted(names) or ["(unknown: see pip's output)"]:
            result.would_compile.append(f"{name}: no wheel for CPython {python} on aarch64 (pip would build the "
                                        "source distribution on the Pi)")
    result.wheels = sorted(path for path in dest.iterdir() if path.suffix == ".whl")
    non_wheels = sorted(path.name for path in dest.iterdir() if path.suffix != ".whl")
    result.would_compile += [f"{name}: not a wheel" for name in non_wheels]
    return result


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~;\[ ]", requirement.strip(), maxsplit=1)[0]).lower()


def _without_wheels(requirements: list[str], python: str, scratch: Path) -> set[str]:
    """Walk the dependency tree one package at a time (``--no-deps``), reading each wheel's
    ``Requires-Dist`` with the Pi's markers; return the names that have no wheel.

    Used after a failed resolution, because pip then names only one culprit, or none at all
    ("conflicting dependencies" when every version of a package depends on an sdist-only one).
    """
    from packaging.requirements import Requirement

    environment = marker_environment(python)
    missing: set[str] = set()
    queue = [(Requirement(line), ()) for line in requirements]
    seen: set[str] = set()
    while queue:
        requirement, extras = queue.pop(0)
        name = _name(requirement.name)
        if requirement.marker is not None and not any(
                requirement.marker.evaluate({**environment, "extra": extra}) for extra in extras or ("",)):
            continue
        if name in seen:
            continue
        seen.add(name)
        dest = scratch / name
        dest.mkdir()
        if pip_download([str(requirement)], python, dest, no_deps=True).returncode != 0:
            missing.add(name)
            continue
        for wheel in dest.glob("*.whl"):
            with zipfile.ZipFile(wheel) as archive:
                metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
                text = archive.read(metadata).decode("utf-8", "replace")
            queue += [(Requirement(value), tuple(requirement.extras)) for key, _, value in
                      (line.partition(": ") for line in text.split("\n\n", 1)[0].splitlines())
                      if key == "Requires-Dist"]
    return missing


def wheel_name_version(path: Path) -> tuple[str, str]:
    """(normalised project name, version) from a wheel's file name."""
    name, version = path.name.split("-")[:2]
    return re.sub(r"[-_.]+", "-", name).lower(), version


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lock_text(resolutions: list[Resolution], plots_only: set[str] | frozenset[str] = frozenset()) -> str:
    """requirements-pi.txt: one pin per project, with the hash of every Pi wheel of that pin.

    ``plots_only``: the projects there only for the explanation plot, listed in a comment the
    install script reads for ``--no-plots``.
    """
    pins: dict[tuple[str, str], dict[str, set[str]]] = {}
    for resolution in resolutions:
        for wheel in resolution.wheels:
            pythons = pins.setdefault(wheel_name_version(wheel), {})
            pythons.setdefault(resolution.python, set()).add(sha256(wheel))
    every = {resolution.python for resolution in resolutions}
    pythons_text = " and ".join(f"CPython {python}" for python in sorted(every))
    lines = [
        "# Raspberry Pi (aarch64, " + pythons_text + ") lock of frame's dependencies, generated by",
        "# tools/pi_wheels.py lock from setup.cfg: install_requires and the extras " + ", ".join(PI_EXTRAS) + ",",
        "# plus " + ", ".join(NO_DEPS) + " without its dependencies (" + "; ".join(NO_DEPS.values()) + ").",
        "# Every pin is a wheel: nothing compiles. Install with",
        "#   pip install --no-deps --require-hashes -r requirements-pi.txt && pip install --no-deps .",
    ]
    if plots_only:
        lines += ["# Needed only for the taste model's explanation plot (tools/install-pi.sh --no-plots skips them):",
                  "# plots-only: " + " ".join(sorted(plots_only))]
    for (name, version), pythons in sorted(pins.items()):
        marker = "" if set(pythons) == every else " ; " + " or ".join(
            f'python_version == "{python}"' for python in sorted(pythons))
        hashes = sorted(set().union(*pythons.values()))
        lines.append(f"{name}=={version}{marker} \\")
        lines += [f"    --hash=sha256:{digest}" + (" \\" if i < len(hashes) - 1 else "")
                  for i, digest in enumerate(hashes)]
    return "\n".join(lines) + "\n"


def locked(python: str, lock: Path = LOCK) -> tuple[list[str], list[str]]:
    """(["name==version", ...] pinned for CPython ``python``, the plots-only project names) from the lock."""
    text = lock.read_text()
    pins = []
    for line in text.splitlines():
        if not line[:1].isalnum():
            continue
        pin, _, marker = line.rstrip(" \\").partition(" ; ")
        if not marker or f'"{python}"' in marker:
            pins.append(pin.strip())
    plots = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("# plots-only:")), [])
    return pins, plots


def _resolve_all(workdir: Path) -> list[Resolution]:
    resolutions = []
    for python in PYTHONS:
        dest = workdir / python
        dest.mkdir(parents=True, exist_ok=True)
        resolutions.append(resolve(python, dest))
    return resolutions


def plots_only(workdir: Path, full: list[Resolution]) -> set[str]:
    """Projects that leave the resolution when ``PLOTS`` is left out, for any Python."""
    without = [r for r in pi_requirements() if _name(r) != PLOTS]
    names: set[str] = set()
    for resolution in full:
        dest = workdir / f"{resolution.python}-no-plots"
        dest.mkdir(parents=True, exist_ok=True)
        lighter = resolve(resolution.python, dest, requirements=without)
        if lighter.would_compile:
            raise SystemExit("\n".join(lighter.would_compile))
        names |= ({wheel_name_version(w)[0] for w in resolution.wheels}
                  - {wheel_name_version(w)[0] for w in lighter.wheels})
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="fail naming every package that would compile on a Pi")
    lock = sub.add_parser("lock", help="write requirements-pi.txt")
    lock.add_argument("--out", type=Path, default=LOCK)
    download = sub.add_parser("download", help="download the locked wheels for CPython 3.11 into DIR")
    download.add_argument("dir", type=Path)
    download.add_argument("--python", default="3.11", choices=sorted(PYTHONS))
    args = parser.parse_args(argv)

    if args.command == "download":
        args.dir.mkdir(parents=True, exist_ok=True)
        done = pip_download(["-r", str(LOCK)], args.python, args.dir, no_deps=True, extra=("--require-hashes",))
        print(done.stdout + done.stderr if done.returncode else f"wheels in {args.dir}")
        return done.returncode
    with tempfile.TemporaryDirectory(prefix="frame-pi-wheels-") as tmp:
        resolutions = _resolve_all(Path(tmp))
        problems = [f"CPython {r.python}: {p}" for r in resolutions for p in r.would_compile]
        if problems:
            print("these would compile on a Raspberry Pi:\n  " + "\n  ".join(problems), file=sys.stderr)
            return 1
        if args.command == "lock":
            args.out.write_text(lock_text(resolutions, plots_only(Path(tmp), resolutions)))
            print(f"wrote {args.out} ({sum(len(r.wheels) for r in resolutions)} wheels)")
        else:
            for r in resolutions:
                print(f"CPython {r.python}: {len(r.wheels)} wheels, nothing to compile")
    return 0


if __name__ == "__main__":
    sys.exit(main())
