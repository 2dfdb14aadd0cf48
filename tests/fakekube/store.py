"""The fake API server's state: objects by (plural, namespace, name), selectors and patches."""

from __future__ import annotations

import copy
import itertools
import re
import threading
import uuid
from datetime import UTC, datetime, timedelta

Key = tuple[str, str, str]  # plural, namespace ("" when cluster-scoped), name

_SET_TERM = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas outside parentheses (`a in (x,y),b=c` has two terms)."""
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [term.strip() for term in terms if term.strip()]


def label_selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """Equality (`=`, `==`, `!=`), set (`in`, `notin`) and existence (`key`, `!key`) terms."""
    for term in _split_terms(selector):
        set_term = _SET_TERM.match(term)
        if set_term:
            key, operator, values = set_term.groups()
            allowed = {value.strip() for value in values.split(",")}
            if (operator == "in") != (labels.get(key) in allowed):
                return False
        elif "!=" in term:
            key, value = (part.strip() for part in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (part.strip() for part in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def field_selector_matches(selector: str, obj: dict) -> bool:
    """`path.to.field=value` and `!=` terms over dotted paths (metadata.name, involvedObject.name)."""
    for term in _split_terms(selector):
        negate = "!=" in term
        path, value = (part.strip() for part in term.replace("!=", "=").replace("==", "=").split("=", 1))
        current: object = obj
        for part in path.split("."):
            current = current.get(part) if isinstance(current, dict) else None
        if (str(current if current is not None else "") == value) == negate:
            return False
    return True


def merge_patch(target: object, patch: object) -> object:
    """RFC 7386 JSON merge patch: maps merge, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class Store:
    """Objects and the counters a real API server keeps (resourceVersion, a clock)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.objects: dict[Key, dict] = {}
        self._versions = itertools.count(1000)
        self._clock = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

    def now(self) -> str:
        """A timestamp one second after the last, so newest-first orderings are unambiguous."""
        self._clock += timedelta(seconds=1)
        return self._clock.strftime("%Y-%m-%dT%H:%M:%SZ")

    def next_version(self) -> str:
        return str(next(self._versions))

    def stamp_new(self, obj: dict) -> dict:
        metadata = obj.setdefault("metadata", {})
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = self.now()
        metadata["resourceVersion"] = self.next_version()
        if "spec" in obj and obj.get("kind") not in ("Namespace", "Node"):
            metadata["generation"] = 1
        return obj

    def stamp_update(self, old: dict, new: dict) -> dict:
        metadata = new.setdefault("metadata", {})
        for key in ("uid", "creationTimestamp", "deletionTimestamp"):
            if key in old.get("metadata", {}):
                metadata[key] = old["metadata"][key]
            else:
                metadata.pop(key, None)
        metadata["resourceVersion"] = self.next_version()
        if "generation" in old.get("metadata", {}):
            changed = old.get("spec") != new.get("spec")
            metadata["generation"] = old["metadata"]["generation"] + (1 if changed else 0)
        return new

    def get(self, key: Key) -> dict | None:
        found = self.objects.get(key)
        return copy.deepcopy(found) if found is not None else None

    def put(self, key: Key, obj: dict) -> dict:
        self.objects[key] = copy.deepcopy(obj)
        return copy.deepcopy(obj)

    def delete(self, key: Key) -> dict | None:
        return self.objects.pop(key, None)

    def list(self, plural: str, namespace: str = "") -> list[dict]:
        return [
            copy.deepcopy(obj)
            for (kind_plural, obj_namespace, _name), obj in sorted(self.objects.items())
            if kind_plural == plural and (not namespace or obj_namespace == namespace)
        ]

    def delete_namespace_contents(self, namespace: str) -> None:
        for key in [key for key in self.objects if key[1] == namespace]:
            del self.objects[key]
