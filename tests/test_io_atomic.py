"""Atomic writes: a file gets the mode a plain ``open`` would give it (a folder too, whatever its writers make), and an
unwritable path is one clear error."""

from __future__ import annotations

import os
import stat

import pytest

from crabrec.errors import CrabError
from crabrec.io import UMASK, write_folder, write_json, write_text


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_file_gets_the_umask_mode_and_a_replaced_one_keeps_its_own(tmp_path):
    new = tmp_path / "deep" / "er" / "a.json"  # missing folders are created
    write_json(new, {"a": 1})
    assert mode(new) == 0o666 & ~UMASK  # not the 0600 of a temporary file
    os.chmod(new, 0o640)
    write_json(new, {"a": 2})
    assert mode(new) == 0o640 and new.read_text() == '{\n  "a": 2\n}\n'
    assert [p.name for p in new.parent.iterdir()] == ["a.json"]  # no temporary file left behind


def test_a_written_folder_gets_the_umask_modes_whatever_its_writers_made(tmp_path):
    """safetensors creates its files 0600: a model folder must still be readable by a teammate or a server running as
    another user, as every other file of a run is; a replaced folder keeps its own mode."""

    def fill(tmp):
        (tmp / "sub").mkdir(parents=True)
        for name, private in [("model.safetensors", 0o600), ("sub/vocab.json", 0o600), ("run.sh", 0o700)]:
            (tmp / name).write_text("x")
            os.chmod(tmp / name, private)
        os.chmod(tmp / "sub", 0o700)

    folder = tmp_path / "model"
    write_folder(folder, fill)
    assert mode(folder) == 0o777 & ~UMASK and mode(folder / "sub") == 0o777 & ~UMASK
    assert mode(folder / "model.safetensors") == mode(folder / "sub" / "vocab.json") == 0o666 & ~UMASK
    assert mode(folder / "run.sh") == 0o777 & ~UMASK  # an executable stays one
    os.chmod(folder, 0o750)
    write_folder(folder, fill)
    assert mode(folder) == 0o750 and mode(folder / "model.safetensors") == 0o666 & ~UMASK


def test_an_unwritable_path_is_one_error_naming_it(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "folder").mkdir()
    for path, expected in [
        (tmp_path / "file" / "a.txt", "cannot create its folder"),
        (tmp_path / "folder", "is a folder; expected a file path"),
    ]:
        with pytest.raises(CrabError, match=expected) as err:
            write_text(path, "y")
        assert str(path) in str(err.value)
    assert (tmp_path / "file").read_text() == "x"


def test_a_pipe_is_refused_as_an_output_instead_of_replaced_by_a_file(tmp_path):
    """A file is written whole, then renamed onto its path: onto a named pipe that would swap the pipe for a file and
    leave its reader waiting forever."""
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(CrabError, match=r"out.jsonl: not a regular file \(a pipe or a device\)"):
        write_text(fifo, "y")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


def test_a_failed_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "a.json"
    write_json(path, [1])
    with pytest.raises(TypeError):
        write_json(path, {"bad": object()})
    assert path.read_text() == "[\n  1\n]\n" and [p.name for p in tmp_path.iterdir()] == ["a.json"]


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "b": 2}',
        '{"a": 1, "a": 2}',
        '{"a": "x:y:z"}',
        '{"a": {"b": 1, "b": 2}}',
        '{"a": [{"b": 1}]}',
        '[{"a": 1}, {"a": 1, "a": 1}]',
        '[[{"a": 1, "a": 2}]]',
        "[1, 2]",
        '"a:b"',
        "{}",
        '{"t": "10:00", "u": 1}',
        '{"a" : 1, "a" : 2}',
        '{"x": [{"a": 1}, {"a": 2}], "y": {"a": 3}}',
    ],
)
def test_loads_unique_refuses_exactly_the_texts_with_a_key_twice_in_one_object(text):
    """The fast path (plain ``json.loads``, then a colon count) decides as the checking parse does, on every text."""
    import json

    from crabrec.io import DuplicateKeyError, loads_unique

    def strict(pairs):
        if len({k for k, _ in pairs}) != len(pairs):
            raise DuplicateKeyError("?")
        return dict(pairs)

    try:
        expected = json.loads(text, object_pairs_hook=strict)
    except DuplicateKeyError:
        expected = DuplicateKeyError
    for given in (text, text.encode()):
        if expected is DuplicateKeyError:
            with pytest.raises(DuplicateKeyError):
                loads_unique(given)
        else:
            assert loads_unique(given) == expected
