"""The provider table in docs/ is generated from the profile data and may not drift."""

from __future__ import annotations

from pathlib import Path

from tools.provider_table import provider_table

import retrybudget as rb

DOC = Path(__file__).resolve().parents[2] / "docs" / "providers.md"


def test_the_committed_provider_table_matches_the_profiles() -> None:
    assert DOC.read_text(encoding="utf-8") == provider_table(), (
        "docs/providers.md drifted: run python tools/provider_table.py > docs/providers.md")


def test_the_table_has_a_row_per_provider_with_its_sources() -> None:
    table = provider_table()
    for profile in rb.PROVIDERS:
        row = next(line for line in table.splitlines() if line.startswith(f"| `{profile.name}` |"))
        assert all(source in row for source in profile.sources[:1])


def test_a_changed_profile_changes_the_table(monkeypatch) -> None:
    import tools.provider_table as generator

    changed = (rb.PROVIDERS[0].derive("generic", transient=frozenset({599})), *rb.PROVIDERS[1:])
    monkeypatch.setattr(generator, "PROVIDERS", changed)
    assert generator.provider_table() != DOC.read_text(encoding="utf-8")


def test_the_documented_profile_file_loads() -> None:
    from retrybudget._profile_file import profile_from_toml

    text = DOC.read_text(encoding="utf-8")
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    acme = profile_from_toml(block)
    assert acme.name == "acme"
    assert acme.delay_headers == (("x-acme-wait-ms", "ms"),)
    assert rb.auto({"api.acme.example": acme}).resolve("https://api.acme.example/v1").name == "acme"
