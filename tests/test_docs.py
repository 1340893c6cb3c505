"""The documentation against the code: the generated reference is current and complete, every command has an
example, every setting a help text, every public function a docstring, and the README stays a start page."""

from __future__ import annotations

import re

import pytest
import typer

from crabrec import config, docgen
from crabrec.cli import app, refresh_help
from tests.conftest import ROOT

REFERENCE = ROOT / "docs" / "reference"


def test_generated_reference_matches_the_code():
    stale = docgen.stale(REFERENCE)
    assert not stale, f"out of date: {stale}; run `python -m crabrec.docgen`"


def commands():
    refresh_help()
    return list(docgen._commands(typer.main.get_command(app), "crabrec"))


def test_cli_reference_covers_every_command_and_option():
    page = (REFERENCE / "cli.md").read_text(encoding="utf-8")
    found = commands()
    assert len(found) >= 15
    for path, cmd in found:
        assert f"## `{path}`" in page
        section = page.split(f"## `{path}`", 1)[1].split("\n## ", 1)[0]
        for param in cmd.params:
            if param.name == "help":
                continue
            shown = param.name.upper() if param.param_type_name == "argument" else param.opts[0]
            assert f"`{shown}" in section, (path, shown)


def test_every_command_help_has_an_example():
    for path, cmd in commands():
        _, example = docgen._help_text(cmd)
        assert example.startswith("crabrec "), path
        assert example.split()[1] in path.split(), (path, example)


def test_config_reference_covers_every_key_with_help_and_reruns():
    page = (REFERENCE / "config.md").read_text(encoding="utf-8")
    model = config.run_config_model()
    keys = config.leaf_keys(model)
    assert len(keys) > 100
    for key in keys:
        row = re.search(rf"^\| `{re.escape(key)}` \|(.*)$", page, re.M)
        assert row, key
        cells = [c.strip() for c in row.group(1).split(" | ")]
        assert len(cells) == 4 and all(cells), (key, cells)  # type, default, re-runs, help


def test_reruns_follow_the_stage_graph():
    readers, dirty = docgen.rerun_stages("crab.gamma")
    assert readers == ["finetune", "tiger-finetune"]  # CRAB's fine-tune of MOR and of TIGER
    assert "rebalance" not in dirty and {"crab-eval", "tiger-crab-eval"} <= set(dirty) and "train" not in dirty
    assert "tiger" not in dirty
    _, dirty = docgen.rerun_stages("train.hidden")
    assert {"train", "rw", "d2lr", "finetune", "rr"} <= set(dirty) and "tiger" not in dirty and "sasrec" not in dirty
    assert docgen.rerun_stages("name") == ([], [])


@pytest.mark.parametrize("module, attr", docgen.API)
def test_public_api_has_docstrings_and_types(module, attr):
    obj = docgen._resolve(module, attr)
    func = obj.fget if isinstance(obj, property) else obj
    assert (func.__doc__ or "").strip(), f"{module}.{attr}"
    if callable(func) and not isinstance(func, type):
        import inspect

        sig = inspect.signature(func)
        missing = [n for n, p in sig.parameters.items() if n != "self" and p.annotation is inspect.Parameter.empty]
        assert not missing, f"{module}.{attr}: parameters without a type: {missing}"
        assert sig.return_annotation is not inspect.Signature.empty, f"{module}.{attr}: no return type"


def test_readme_is_a_start_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 12 * 1024
    for target in re.findall(r"\]\(([^)#]+)", readme):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README links to a missing {target}"
    assert not re.search(r"issue #\d|\bround \d|\bsession\b", readme, re.I)


def test_docs_hold_no_lab_notebook():
    for page in (ROOT / "docs").rglob("*.md"):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"issue #\d|\bround \d\b|this session|later session", text, re.I), page


def test_version_flag(capsys):
    from crabrec import __version__
    from crabrec.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code in (0, None)
    assert capsys.readouterr().out.strip() == f"crabrec {__version__}"


@pytest.mark.parametrize("group", [[], ["data"], ["sid"], ["backbone"]])
def test_a_commands_table_row_is_its_summary_without_the_docstrings_line_breaks(group, monkeypatch, capsys):
    from tests.conftest import cli

    monkeypatch.setenv("COLUMNS", "400")  # wide enough that no summary wraps: a break left in one shows as a line
    cli([*group, "--help"])
    lines = capsys.readouterr().out.splitlines()
    refresh_help()
    root = typer.main.get_command(app)
    cmd = root.commands[group[0]] if group else root
    for name, sub in cmd.commands.items():
        if getattr(sub, "commands", None):  # a group: its own one-line help
            continue
        summary = " ".join(sub.help.split("\n\n")[0].split())
        assert any(name in line and summary in line for line in lines), (group, name, summary)
