"""``frame model import SRC DST``: a Stable Diffusion checkpoint (single-file .safetensors or .ckpt, a
diffusers folder, or an http(s) URL of either) into the ONNX folder frame runs, without torch.

Import-light: numpy/onnx load inside the handler.
"""

from __future__ import annotations

import argparse
import sys

from frame.errors import UsageError

DESCRIPTION = (
    "Import an A1111/civitai checkpoint (SD 1.x, SD 2.x, SDXL, SD/SDXL Turbo: .safetensors or .ckpt), a diffusers "
    "folder with .safetensors weights, or an http(s) URL of either (read with range requests, nothing copied "
    "first; a dropped connection is retried). What the file is comes from its keys and shapes, and is printed. "
    "DST is a new diffusers ONNX folder; it appears only when complete, and a stopped import resumes when run "
    "again. With --into, SRC is a standalone VAE file that replaces MODEL's VAE. See docs/models.md.")


def register(commands) -> None:
    parser = commands.add_parser("import", help="import a checkpoint (.safetensors, .ckpt, diffusers folder, URL)",
                                 description=DESCRIPTION)
    parser.add_argument("src", metavar="SRC", help="checkpoint file, diffusers folder, or http(s) URL")
    parser.add_argument("dst", metavar="DST", nargs="?", help="new model folder")
    parser.add_argument("--weights", choices=("fp32", "fp16", "uint8"), default="fp16",
                        help="weight precision to write (default fp16; uint8 as 'frame model convert')")
    parser.add_argument("--vae", metavar="FILE", help="a standalone VAE file to use instead of the checkpoint's")
    parser.add_argument("--prediction", choices=("epsilon", "v"),
                        help="prediction type when the file does not say (SD 2.x defaults to v at 768 px; "
                             "SD 2.x 512-base and SD Turbo: epsilon)")
    parser.add_argument("--ema", action="store_true", help="use the UNet's EMA weights where the file has both")
    parser.add_argument("--config-from", metavar="DIR", dest="config_from",
                        help="a diffusers folder whose config.json files (and tokenizers) to use, for widths a "
                             "checkpoint cannot tell (heads, groups); checked against the weights")
    parser.add_argument("--into", metavar="MODEL", help="SRC is a VAE file: replace MODEL's VAE with it")
    parser.add_argument("--tiny-vae", action="store_true", dest="tiny_vae",
                        help="SRC is TAESD: taesd, taesdxl, a taesd*_decoder.safetensors (path or URL; its _encoder "
                             "file beside it is read too) or a diffusers AutoencoderTiny folder; DST a new "
                             "tiny-VAE folder for model.vae_decoder")
    parser.set_defaults(func=import_command)


def import_command(args: argparse.Namespace) -> int:
    if getattr(args, "tiny_vae", False):
        return _tiny_vae(args)
    if args.into:
        if args.dst:
            raise UsageError("give either DST (a new model) or --into MODEL (replace its VAE), not both")
        return _replace_vae(args)
    if not args.dst:
        raise UsageError("DST is missing: the new model folder to write")
    from frame.convert.importer.writer import ImportOptions, import_model

    def said(found) -> None:
        print(f"detected: {found.label}")
        for note in found.notes:
            print(f"  {note}")
        sys.stdout.flush()

    options = ImportOptions(weights=args.weights, prediction=args.prediction, use_ema=args.ema, vae=args.vae,
                            config_dir=args.config_from)
    builders = _LazyBuilders()
    result = import_model(args.src, args.dst, options, builders, on_detected=lambda f: (said(f), builders.use(f)))
    if result.resumed:
        print(f"kept from the stopped import: {', '.join(result.resumed)}")
    before = sum(r.bytes_before for r in result.reports.values())
    after = sum(r.bytes_after for r in result.reports.values())
    for graph, report in result.reports.items():
        converted = f"{len(report.converted)} weights to {args.weights}; " if args.weights != "fp32" else ""
        print(f"{graph}: {converted}{report.bytes_before / 1e6:.1f} MB (float32) -> {report.bytes_after / 1e6:.1f} MB")
    print(f"wrote {args.dst}: weights {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB")
    return 0


class _LazyBuilders(dict):
    """The graph builders of the detected family, filled in once detection has said which."""

    def use(self, found) -> None:
        from frame.convert.importer.graphs import frame_builders

        self.update(frame_builders(found.family))


def _replace_vae(args: argparse.Namespace) -> int:
    from frame.convert.importer.graphs import frame_builders
    from frame.convert.importer.vae import replace_vae

    reports = replace_vae(args.src, args.into, args.weights, frame_builders("sd1"))
    for graph, report in reports.items():
        print(f"{graph}: {report.bytes_before / 1e6:.1f} MB -> {report.bytes_after / 1e6:.1f} MB")
    print(f"replaced the VAE of {args.into} with {args.src}")
    return 0


def _tiny_vae(args: argparse.Namespace) -> int:
    from frame.convert.importer.vae import import_tiny_vae

    if args.into or not args.dst:
        raise UsageError("--tiny-vae writes a new folder: give SRC and DST (no --into)")
    reports = import_tiny_vae(args.src, args.dst, args.weights)
    for graph, report in reports.items():
        print(f"{graph}: {report.bytes_before / 1e6:.1f} MB (float32) -> {report.bytes_after / 1e6:.1f} MB")
    print(f"wrote {args.dst}: set model.vae_decoder to it (docs/models.md)")
    return 0
