"""Home Assistant's MQTT discovery schema, the keys only: what each component the frame uses requires
and allows, written from HA's MQTT integration docs (home-assistant.io/integrations/<component>.mqtt/,
"Configuration Variables"; the device and origin blocks from integrations/mqtt/, "Discovery
messages"). HA drops a discovery message with an unknown key or without a required one (its schemas
are voluptuous with ``extra=REMOVE_EXTRA`` for discovery, but a wrong key is then silently lost), so
the frame's messages use these keys and no others."""

from __future__ import annotations

# every MQTT entity (MQTT_ENTITY_COMMON_SCHEMA and the availability schema)
COMMON = {"availability", "availability_mode", "availability_template", "availability_topic", "device",
          "enabled_by_default", "encoding", "entity_category", "entity_picture", "icon", "json_attributes_template",
          "json_attributes_topic", "name", "object_id", "default_entity_id", "origin", "payload_available",
          "payload_not_available", "qos", "unique_id"}
DEVICE = {"configuration_url", "connections", "hw_version", "identifiers", "manufacturer", "model", "model_id",
          "name", "serial_number", "suggested_area", "sw_version", "via_device"}
ORIGIN = {"name", "sw_version", "support_url"}

# component -> (required, its own allowed keys)
COMPONENTS: dict[str, tuple[set[str], set[str]]] = {
    "image": (set(), {"content_type", "image_encoding", "image_topic", "url_template", "url_topic"}),
    "sensor": ({"state_topic"}, {"device_class", "expire_after", "force_update", "last_reset_value_template",
                                 "options", "state_class", "state_topic", "suggested_display_precision",
                                 "unit_of_measurement", "value_template"}),
    "button": ({"command_topic"}, {"command_template", "command_topic", "device_class", "payload_press", "retain"}),
    "text": ({"command_topic"}, {"command_template", "command_topic", "max", "min", "mode", "pattern", "retain",
                                 "state_topic", "value_template"}),
    "select": ({"command_topic", "options"}, {"command_template", "command_topic", "optimistic", "options", "retain",
                                              "state_topic", "value_template"}),
    "switch": ({"command_topic"}, {"command_template", "command_topic", "device_class", "optimistic", "payload_off",
                                   "payload_on", "retain", "state_off", "state_on", "state_topic", "value_template"}),
}
SENSOR_STATE_CLASSES = {"measurement", "total", "total_increasing", "measurement_angle"}
ENTITY_CATEGORIES = {"config", "diagnostic"}
TEXT_MODES = {"text", "password"}


def problems(component: str, payload: dict) -> list[str]:
    """What HA's schema would refuse or lose in one discovery payload."""
    if component not in COMPONENTS:
        return [f"component {component!r} is not one the frame uses"]
    required, own = COMPONENTS[component]
    found = [f"missing {key}" for key in sorted(required - set(payload))]
    found += [f"unknown key {key}" for key in sorted(set(payload) - own - COMMON)]
    if component == "image" and ("url_topic" in payload) == ("image_topic" in payload):
        found.append("an image needs exactly one of url_topic and image_topic")
    found += [f"unknown device key {key}" for key in sorted(set(payload.get("device", {})) - DEVICE)]
    if not payload.get("device", {}).get("identifiers") and not payload.get("device", {}).get("connections"):
        found.append("the device needs identifiers or connections")
    found += [f"unknown origin key {key}" for key in sorted(set(payload.get("origin", {})) - ORIGIN)]
    if "origin" in payload and "name" not in payload["origin"]:
        found.append("origin needs a name")
    if "unique_id" not in payload:
        found.append("no unique_id (HA needs one to group the entity under its device)")
    if payload.get("entity_category", "diagnostic") not in ENTITY_CATEGORIES:
        found.append(f"entity_category {payload['entity_category']!r}")
    if component == "sensor":
        if payload.get("device_class") == "enum" and not payload.get("options"):
            found.append("an enum sensor needs options")
        if payload.get("state_class", "measurement") not in SENSOR_STATE_CLASSES:
            found.append(f"state_class {payload['state_class']!r}")
    if component == "text":
        if not 0 <= payload.get("min", 0) <= payload.get("max", 255) <= 255:
            found.append("a text's min/max must be within 0..255")
        if payload.get("mode", "text") not in TEXT_MODES:
            found.append(f"text mode {payload['mode']!r}")
    if component == "select" and (not isinstance(payload.get("options"), list) or not payload.get("options")):
        found.append("a select needs a non-empty list of options")
    if payload.get("qos", 0) not in (0, 1, 2):
        found.append(f"qos {payload['qos']!r}")
    return found
