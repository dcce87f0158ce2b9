"""The configuration schema: one frozen dataclass per section of ``config.yaml``.

The defaults here are the built-in layer; ``config.yaml`` at the repo root documents every key with the
same defaults (a test keeps the two in step). Field metadata carries what the generic validator in
``validate.py`` needs: ``check`` (a function returning an error message or ``None``) and ``secret``:
``True`` for a value never printed (shown as ``***``), ``URL_SECRET`` for a URL whose userinfo and
query values are hidden wherever it is shown (``frame.redact``); printers go by this marking,
never by a key's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from frame.config import checks
from frame.config.panels import palette_names, panel_names
from frame.memory_budget import WORKER_MEMORY_LIMIT_MB

URL_SECRET = "url"  # the value may be a URL carrying credentials (user:password@, ?key=...)
# The names an owner can type, listed once here (the daemon checks them without numpy); the registries
# (frame.registry.Registry: samplers, dithers) refuse any name not listed; the engine, which never
# sees the configuration, keeps its own ProviderName list beside its providers; tests/test_registries.py
# checks each list and its registry agree. Panel and palette names are the
# rows of the panel table (frame.config.panels), which display.panel and display.palette are checked against.
SamplerName = Literal["euler_a", "euler", "ddim", "dpm++2m", "dpm++2m_karras", "lcm"]
# "auto" = the dither registry's default method
DitherName = Literal["auto", "linear-serpentine", "floyd-steinberg", "atkinson", "ordered", "blue-noise", "none"]
# "auto" = prefetch from disk, the http provider for URLs (frame.engine.providers is the table, whose
# ProviderName must equal this list: tests/test_registries.py)
WeightsName = Literal["auto", "nocache", "prefetch", "ram"]
FitName = Literal["cover", "contain", "blur-pad"]
# where a render's random numbers come from (frame.diffusion.noise is the table; docs/seeds.md)
NoiseName = Literal["frame", "torch-cpu", "a1111-nv"]
Rotation = Literal[0, 90, 180, 270]


def _opt(default, check=None, secret: bool | str = False):
    """A field default with optional value check and secrecy marking (False, True or URL_SECRET)."""
    metadata = {"check": check, "secret": secret}
    if isinstance(default, (list, dict, tuple)):
        return field(default_factory=lambda: default, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class WeightCacheConfig:
    enabled: bool = False
    dir: str = ""
    max_mb: int = _opt(4096, checks.positive)


@dataclass(frozen=True)
class LoraEntry:
    """A LoRA on every picture: ``file`` is a path or a NAME in a ``loras`` folder (see docs/guide.md, "LoRAs");
    a prompt's ``<lora:NAME:SCALE>`` adds one for that picture."""

    file: str = _opt("", checks.non_empty_text)
    scale: float = _opt(1.0, checks.lora_scale)


@dataclass(frozen=True)
class ModelConfig:
    source: str = _opt("demo", checks.model_source, secret=URL_SECRET)
    weights: WeightsName = "auto"
    attention_slices: int | None = _opt(None, checks.positive)
    sampler: SamplerName = "euler_a"
    noise: NoiseName = "frame"
    steps: int | None = _opt(None, checks.positive)
    guidance: float | None = _opt(None, checks.guidance)
    negative_prompt: str = "blurry, low quality, text, watermark, signature, frame, border"
    size: str = _opt("auto", checks.size_or_auto)
    vae_tile: int | None = _opt(None, checks.positive)
    vae_tile_overlap: int = _opt(8, checks.non_negative)
    vae_decoder: str = _opt("", checks.tiny_vae, secret=URL_SECRET)
    cache_dir: str = ""
    token: str = _opt("", checks.bearer_token, secret=True)
    http_timeout_seconds: float = _opt(30.0, checks.positive)
    http_give_up_seconds: float = _opt(600.0, checks.positive)
    cache: WeightCacheConfig = field(default_factory=WeightCacheConfig)
    loras: tuple[LoraEntry, ...] = ()


@dataclass(frozen=True)
class RemoteRenderConfig:
    """A render server on the LAN: AUTOMATIC1111-compatible (A1111, Forge, SD.Next, ``frame
    serve-render``; ``render.backend: remote``) or ComfyUI (``render.backend: comfyui``, which alone
    reads ``workflow`` and ``checkpoint``)."""

    url: str = _opt("", checks.http_url_or_empty, secret=URL_SECRET)
    user: str = ""
    password: str = _opt("", secret=True)
    token: str = _opt("", secret=True)
    steps: int = _opt(25, checks.positive)
    guidance: float = _opt(7.0, checks.guidance)
    sampler: SamplerName = "dpm++2m_karras"
    size: str = _opt("auto", checks.remote_size_or_auto)
    connect_timeout_seconds: float = _opt(5.0, checks.positive)
    job_timeout_minutes: float = _opt(30.0, checks.positive)
    poll_seconds: float = _opt(2.0, checks.positive)
    lost_after_seconds: float = _opt(60.0, checks.positive)
    workflow: str = ""
    checkpoint: str = ""


@dataclass(frozen=True)
class RenderConfig:
    backend: Literal["local", "remote", "comfyui"] = "local"
    remote: RemoteRenderConfig = field(default_factory=RemoteRenderConfig)
    previews: bool = True


@dataclass(frozen=True)
class DisplayConfig:
    panel: str = _opt("virtual", checks.known_name("panel", panel_names()))
    size: str = _opt("800x480", checks.size)
    palette: str = _opt("spectra6", checks.known_name("palette", palette_names()))
    rotate: Rotation = 0
    fit: FitName = "cover"
    saturation: float | None = _opt(None, checks.unit_interval)
    dither: DitherName = "auto"
    out_dir: str = ""
    min_refresh_seconds: int | None = _opt(None, checks.non_negative)
    busy_timeout_seconds: float = _opt(120.0, checks.positive)


@dataclass(frozen=True)
class TasteConfig:
    themes: tuple[str, ...] = _opt((
        "a quiet harbour at dawn", "a mountain lake under stars", "a bustling night market",
        "a field of sunflowers", "a lighthouse in a storm", "a cozy reading nook",
        "an old city street in the rain", "a desert canyon at sunset", "a koi pond in autumn",
        "a futuristic skyline",
    ), checks.non_empty_list)
    styles: tuple[str, ...] = _opt((
        "watercolor painting", "oil painting", "ukiyo-e woodblock print", "pencil sketch",
        "photograph, golden hour", "art nouveau poster", "impressionist painting", "linocut print",
    ), checks.non_empty_list)
    explore_rate: float = _opt(0.2, checks.unit_interval)
    min_ratings: int = _opt(10, checks.non_negative)
    avoid_recent: int = _opt(5, checks.non_negative)
    n_neighbors: int = _opt(8, checks.positive)
    axes: dict[str, tuple[str, ...]] = _opt({}, checks.axes)


@dataclass(frozen=True)
class FeedSource:
    url: str = _opt("", checks.http_url, secret=URL_SECRET)
    format: Literal["json", "text", "rss"] = "json"
    name: str = ""
    template: str = _opt("{title}, {style}", checks.feed_template)
    theme: str = ""
    weight: float = _opt(1.0, checks.feed_weight)


@dataclass(frozen=True)
class FeedsConfig:
    sources: tuple[FeedSource, ...] = ()
    refresh_minutes: int = _opt(180, checks.within(1, checks.MINUTES_A_YEAR))
    timeout_seconds: float = _opt(10.0, checks.positive)
    max_bytes: int = _opt(1_000_000, checks.positive)
    max_prompt_chars: int = _opt(300, checks.positive)
    blocklist: tuple[str, ...] = _opt((), checks.blocklist)


@dataclass(frozen=True)
class ScheduleConfig:
    timezone: str = _opt("local", checks.timezone)
    render_at: str = _opt("01:00", checks.clock_time)
    deadline: str = _opt("07:00", checks.clock_time)
    show_at: str = _opt("07:00", checks.clock_time)
    quiet_hours: str = _opt("", checks.time_range_or_empty)
    rotate_favourites_minutes: int = _opt(0, checks.within(0, checks.MINUTES_A_YEAR))
    misfire_grace_minutes: int = _opt(360, checks.within(0, checks.MINUTES_A_YEAR))


@dataclass(frozen=True)
class WorkerConfig:
    nice: int = _opt(10, checks.nice_value)
    memory_limit_mb: int = _opt(WORKER_MEMORY_LIMIT_MB, checks.positive)
    max_restarts: int = _opt(5, checks.non_negative)


@dataclass(frozen=True)
class WebConfig:
    listen: str = _opt("0.0.0.0:8080", checks.host_port)
    token: str = _opt("", checks.token, secret=True)
    hosts: tuple[str, ...] = _opt((), checks.host_names)
    # a logged-out visitor may see the painted pictures (never uploads, settings, status or a change)
    public_gallery: bool = False


@dataclass(frozen=True)
class ButtonsConfig:
    enabled: bool = False
    pins: dict[str, str] = _opt({"5": "like", "6": "dislike", "16": "next", "24": "previous"},
                                checks.button_pins)
    bounce_ms: int = _opt(50, checks.positive)
    hold_seconds: float = _opt(1.5, checks.positive)


@dataclass(frozen=True)
class GalleryConfig:
    max_pictures: int = _opt(365, checks.within(1, 10_000_000))
    max_disk_mb: int = _opt(1024, checks.within(1, 100_000_000))  # 100 TB


@dataclass(frozen=True)
class MqttTlsConfig:
    enabled: bool = False
    ca_file: str = ""  # "" = the system's certificate authorities


@dataclass(frozen=True)
class MqttConfig:
    """Home Assistant through an MQTT broker (docs/home-assistant.md); off while ``host`` is empty."""

    host: str = _opt("", checks.broker_host)
    port: int = _opt(1883, checks.within(1, 65535))
    username: str = _opt("", checks.mqtt_credential)
    password: str = _opt("", checks.mqtt_credential, secret=True)
    password_file: str = ""
    tls: MqttTlsConfig = field(default_factory=MqttTlsConfig)
    base_topic: str = _opt("frame", checks.mqtt_topic)
    discovery_prefix: str = _opt("homeassistant", checks.mqtt_topic)
    frame_url: str = _opt("", checks.http_url_or_empty, secret=URL_SECRET)


@dataclass(frozen=True)
class LoggingConfig:
    level: Literal["debug", "info", "warning", "error"] = "info"


@dataclass(frozen=True)
class Config:
    state_dir: str = "~/.local/state/frame"
    model: ModelConfig = field(default_factory=ModelConfig)
    render: RenderConfig = field(default_factory=RenderConfig)
    display: DisplayConfig = field(default_factory=DisplayConfig)
    taste: TasteConfig = field(default_factory=TasteConfig)
    feeds: FeedsConfig = field(default_factory=FeedsConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    worker: WorkerConfig = field(default_factory=WorkerConfig)
    web: WebConfig = field(default_factory=WebConfig)
    buttons: ButtonsConfig = field(default_factory=ButtonsConfig)
    gallery: GalleryConfig = field(default_factory=GalleryConfig)
    mqtt: MqttConfig = field(default_factory=MqttConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
