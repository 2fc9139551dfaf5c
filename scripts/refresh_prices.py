"""Regenerate daemon/data/model_prices.json, the price table for well-known model names.

The source is the price map that the `litellm` package ships
(``model_prices_and_context_window_backup.json``, maintained with its releases).
Only the wheel is fetched, with pip and without its dependencies, and only that
JSON file is read from it: nothing is installed or imported. Run from the
repository root:

    python scripts/refresh_prices.py              # the newest litellm on the index
    python scripts/refresh_prices.py --version 1.110.2
    python scripts/refresh_prices.py --from path/to/model_prices.json

Kept: chat models of the providers whose names people put in `model.default`
(bare names such as ``gpt-4o``; provider-prefixed ones such as
``openrouter/...``), converted to USD per million tokens. The test
tests/daemon/test_usage.py fails once the snapshot is older than the age
docs/dependencies.md names, which is when this script is run again.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "daemon" / "data" / "model_prices.json"
PROVIDERS = {"openai", "anthropic", "gemini", "mistral", "deepseek", "xai", "groq",
             "openrouter", "together_ai", "fireworks_ai", "deepinfra", "moonshot",
             "perplexity", "cohere_chat", "ollama"}


def _per_million(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return round(float(value) * 1_000_000, 6)
    return None


def convert(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    models: dict[str, dict[str, Any]] = {}
    for name, entry in sorted(raw.items()):
        if not isinstance(entry, dict) or entry.get("mode") != "chat":
            continue
        if entry.get("litellm_provider") not in PROVIDERS:
            continue
        price = {"input": _per_million(entry.get("input_cost_per_token")),
                 "output": _per_million(entry.get("output_cost_per_token"))}
        if price["input"] is None or price["output"] is None:
            continue
        cached = _per_million(entry.get("cache_read_input_token_cost"))
        if cached is not None:
            price["cached_input"] = cached
        window = entry.get("max_input_tokens")
        if isinstance(window, int) and window > 0:
            price["context_window"] = window
        models[name] = price
    return models


def _from_wheel(version: str | None) -> tuple[dict[str, Any], str]:
    spec = f"litellm=={version}" if version else "litellm"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp,
                        spec], check=True)
        wheel = next(Path(tmp).glob("litellm-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            raw = json.loads(z.read("litellm/model_prices_and_context_window_backup.json"))
        return raw, wheel.name.split("-")[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", help="the litellm version to read (default: newest)")
    ap.add_argument("--from", dest="path", type=Path, help="a model_prices.json to read")
    args = ap.parse_args()
    if args.path:
        raw, source = json.loads(args.path.read_text()), f"file {args.path.name}"
    else:
        raw, version = _from_wheel(args.version)
        source = f"litellm {version} (model_prices_and_context_window_backup.json)"
    doc = {"source": source, "generated_at": datetime.date.today().isoformat(),
           "unit": "USD per million tokens", "models": convert(raw)}
    OUT.write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")
    print(f"{OUT}: {len(doc['models'])} models from {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
