"""Typed access to one Hugging Face config.json dict through its family's key names and defaults
(models/catalogue/hf_families.py): a count is an int and never a bool, a flag a bool, and every bad
value is one VramplanError naming the config key. models/catalogue/hf_config.py reads each family's
parts through it."""

from __future__ import annotations

from typing import Any, Literal, overload

from vramplan.models.catalogue.config_file import show_kind as _show
from vramplan.models.catalogue.hf_family_parts import Family
from vramplan.models.core.errors import VramplanError

# Architecture fields every family reads from the same config.json key (unless its Family.keys says otherwise)
COMMON_KEYS: dict[str, str | list[str]] = {
    "num_layers": "num_hidden_layers", "num_kv_heads": "num_key_value_heads",
    "experts_per_token": "num_experts_per_tok", "attention_dropout": "attention_dropout",
}
MISSING = object()  # a key the config leaves out (None is a value: "not set" in some families)


class Reader:
    """Typed access to one config dict through its family's key names and defaults."""

    def __init__(self, config: dict[str, Any], family: Family, source: str, scope: str = "") -> None:
        # scope: where the decoder's keys are read ("text_config." for a multimodal checkpoint)
        self.config, self.family, self.source, self.scope = config, family, source, scope

    def config_names(self, key: str) -> list[str]:
        """The config.json keys a part may be read from, first present first; none where the family's
        config has no such key (Family.keys None: its modeling code never reads it)."""
        names = self.family.keys[key] if key in self.family.keys else COMMON_KEYS.get(key, key)
        return [] if names is None else [names] if isinstance(names, str) else names

    def names(self, key: str) -> bool:
        """Whether the family reads this part at all (a key of its own in Family.keys): a part one
        family's modeling code has is never read from another family's file."""
        return key in self.family.keys

    def has(self, key: str) -> bool:
        return self.raw(key, MISSING) is not MISSING

    def raw(self, key: str, default: Any = None) -> Any:
        for name in self.config_names(key):
            found, value = self._lookup(name)
            if found:
                return self._one_for_every_layer(key, name, value)
        return self.family.defaults.get(key, default)

    def _lookup(self, name: str) -> tuple[bool, Any]:
        """A key of the config, or a dotted path into its nested objects (MPT's attn_config.attn_pdrop)."""
        if "." not in name:
            return (name in self.config, self.config.get(name))
        value: Any = self.config
        for part in name.split("."):
            if not isinstance(value, dict) or part not in value:
                return (False, None)
            value = value[part]
        return (True, value)

    def _one_for_every_layer(self, key: str, name: str, value: Any) -> Any:
        """A key the family may give per layer (Family.layer_lists: HunYuan's moe_topk) is one value
        when every layer's is the same; vramplan models one."""
        if key not in self.family.layer_lists or not isinstance(value, list):
            return value
        if not value or any(isinstance(v, list) or v != value[0] for v in value):
            raise VramplanError(name, _show(value), f"varies by layer (or is empty); vramplan models one value for "
                                                    f"every layer (in {self.source})")
        return value[0]

    def key(self, key: str) -> str:
        names = self.config_names(key) or [key]
        return next((n for n in names if self._lookup(n)[0]), names[0])

    @overload
    def count(self, key: str, minimum: int = 1, optional: Literal[False] = False) -> int: ...

    @overload
    def count(self, key: str, minimum: int = 1, *, optional: Literal[True]) -> int | None: ...

    def count(self, key: str, minimum: int = 1, optional: bool = False) -> int | None:
        value = self.raw(key, MISSING)
        if value is MISSING or (value is None and optional):
            if optional:
                return None
            raise VramplanError("model", self.source, f"config.json lacks {self.scope + self.key(key)!r}"
                                + (" (a multimodal checkpoint's decoder is read from its text_config)" if self.scope else ""))
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise VramplanError(self.key(key), _show(value), f"must be a whole number >= {minimum} in {self.source}")
        return value

    def flag(self, key: str) -> bool:
        value = self.raw(key, False)
        if not isinstance(value, bool):
            raise VramplanError(self.key(key), _show(value), f"must be true or false in {self.source}")
        return value

    def number(self, key: str) -> float | None:
        value = self.raw(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise VramplanError(self.key(key), _show(value), f"must be a number in {self.source}")
        return float(value)

    def unsupported(self, key: str, why: str) -> VramplanError:
        return VramplanError(self.key(key), _show(self.raw(key)), f"{why} (in {self.source})")
