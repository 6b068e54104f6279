"""`blocktrace trace`: the table, JSON and CSV outputs, and one clean `error:` line for every bad input; and what
`blocktrace serve` says of itself (its help, its banner, the teacher password it uses)."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from blocktrace.app.cli import build_parser, main
from blocktrace.app.serve import Classroom, banner, websocket_origins
from blocktrace.explorables.engine import run_preset

ROOT = Path(__file__).resolve().parents[2]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of main(argv), whether it returns or raises SystemExit."""
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    code, out, err = _run([*argv, "--json"], capsys)
    assert (code, err) == (0, "")
    return json.loads(out)


def _stage(export: dict, key: str) -> np.ndarray:
    return np.array(next(s["values"] for s in export["stages"] if s["key"] == key), dtype=float)


def test_default_table_shows_every_stage(capsys: pytest.CaptureFixture[str]) -> None:
    """The default table names every stage by label and key; q, k, v and scores appear with --detail."""
    code, out, err = _run(["trace"], capsys)
    assert (code, err) == (0, "")
    trace = run_preset("single-token")
    hidden_unless_detail = {"attn.q", "attn.k", "attn.v", "attn.scores"}
    for stage in trace:
        line = f"{stage.label}  [{stage.key}]"
        assert (line in out) == (stage.local_key not in hidden_unless_detail), stage.key
    code, detailed, _ = _run(["trace", "--detail"], capsys)
    assert code == 0
    for stage in trace:
        assert f"{stage.label}  [{stage.key}]" in detailed


def test_table_for_every_preset(capsys: pytest.CaptureFixture[str]) -> None:
    """Each preset prints a table whose last stage is the block output."""
    for name in ("single-token", "eat-an-orange", "decoder-lab"):
        code, out, err = _run(["trace", "--preset", name], capsys)
        assert (code, err) == (0, "")
        assert "[blocks.0.resid_post]" in out


def test_json_has_tokens_config_params_and_stages(capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints the export contract, with the stages in forward order ending at the output."""
    export = _json(["trace", "--preset", "eat-an-orange"], capsys)
    assert {"tokens", "config", "params", "stages"} <= set(export)
    assert export["tokens"] == ["eat", "an", "orange"]
    keys = [s["key"] for s in export["stages"]]
    assert keys[0] == "embed" and keys[-1] == "blocks.0.resid_post"
    assert export["config"]["d_model"] == 2


def test_format_json_equals_json_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """--format json and --json print the same document."""
    a = _json(["trace", "--layers", "2"], capsys)
    code, out, _ = _run(["trace", "--layers", "2", "--format", "json"], capsys)
    assert code == 0
    assert json.loads(out) == a


def test_csv_output(capsys: pytest.CaptureFixture[str]) -> None:
    """--format csv prints the documented header and one row per number."""
    code, out, err = _run(["trace", "--format", "csv", "--preset", "decoder-lab"], capsys)
    assert (code, err) == (0, "")
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["key", "label", "batch", "head", "pos", "token", "key_pos", "component", "value"]
    trace = run_preset("decoder-lab")
    assert len(rows) - 1 == sum(s.values.size for s in trace)


def test_tokens_with_reverse(capsys: pytest.CaptureFixture[str]) -> None:
    """--tokens sets the phrase and --reverse traces it back to front."""
    export = _json(["trace", "--preset", "eat-an-orange", "--tokens", "eat an orange", "--reverse"], capsys)
    assert export["tokens"] == ["orange", "an", "eat"]
    forward_ = _json(["trace", "--preset", "eat-an-orange", "--tokens", "eat an orange"], capsys)
    np.testing.assert_array_equal(_stage(export, "embed"), _stage(forward_, "embed")[::-1])


def test_input_vector_with_attention_off(capsys: pytest.CaptureFixture[str]) -> None:
    """--input "2, 2, 2, 2" --attention-scale 0: positions off, RMSNorm gives ones, resid_mid equals the input."""
    export = _json(["trace", "--input", "2, 2, 2, 2", "--attention-scale", "0"], capsys)
    assert export["config"]["positions"] is False
    assert export["config"]["attention_scale"] == 0.0
    assert "pos_embed" not in [s["key"] for s in export["stages"]]
    np.testing.assert_allclose(_stage(export, "blocks.0.ln1.normalized"), [[1.0, 1.0, 1.0, 1.0]], rtol=1e-6)
    np.testing.assert_array_equal(_stage(export, "blocks.0.resid_mid"), [[2.0, 2.0, 2.0, 2.0]])


def test_input_sets_width_and_positions_can_be_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    """The vector's length sets d_model, and --positions on adds the position stage."""
    export = _json(["trace", "--input", "[1 -2 3]", "--positions", "on"], capsys)
    assert export["config"]["d_model"] == 3
    assert "pos_embed" in [s["key"] for s in export["stages"]]
    np.testing.assert_array_equal(_stage(export, "embed"), [[1.0, -2.0, 3.0]])


def test_config_flags_reach_the_config(capsys: pytest.CaptureFixture[str]) -> None:
    """Each config flag lands in the exported config under its field name."""
    export = _json(["trace", "--residual", "replace", "--norm", "layernorm", "--placement", "post", "--mlp", "gelu",
                    "--causal", "on", "--layers", "3", "--heads", "2", "--d-model", "6", "--seed", "9",
                    "--mlp-scale", "0.5", "--eps", "1e-5", "--tokens", "a b"], capsys)
    c = export["config"]
    assert (c["residual"], c["norm"], c["placement"], c["mlp"], c["causal"]) == ("replace", "layernorm", "post",
                                                                                  "gelu", True)
    assert (c["n_layers"], c["n_heads"], c["d_head"], c["d_model"], c["seed"]) == (3, 2, 3, 6, 9)
    assert (c["mlp_scale"], c["eps"]) == (0.5, 1e-5)
    assert export["stages"][-1]["key"] == "blocks.2.resid_post"


BAD_INPUTS = {
    "empty input": ["--input", ""],
    "word in input": ["--input", "1, abc"],
    "nan in input": ["--input", "nan, 1"],
    "1e400 in input": ["--input", "1e400, 2"],
    "heads do not divide width": ["--heads", "3"],
    "zero layers": ["--layers", "0"],
    "49 layers": ["--layers", "49"],
    "width 513": ["--d-model", "513"],
    "nan scale": ["--attention-scale", "nan"],
    "inf scale": ["--attention-scale", "inf"],
    "positions maybe": ["--positions", "maybe"],
    "input and tokens": ["--input", "1, 2", "--tokens", "a b"],
    "empty phrase": ["--tokens", "   "],
    "scale too large": ["--attention-scale", "1e3"],
    "layers not a number": ["--layers", "two"],
    "negative seed": ["--seed", "-1"],
    "unknown preset": ["--preset", "gpt-5"],
    "input width vs d-model": ["--input", "1, 2, 3", "--d-model", "4"],
    "eps out of range": ["--eps", "2"],
}


@pytest.mark.parametrize("argv", list(BAD_INPUTS.values()), ids=list(BAD_INPUTS))
def test_bad_input_exits_2_with_one_error_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Every bad input exits with status 2 and exactly one stderr line starting "error:", never a traceback."""
    code, out, err = _run(["trace", *argv], capsys)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error:")
    assert "Traceback" not in err


def test_error_line_names_the_problem(capsys: pytest.CaptureFixture[str]) -> None:
    """The error line says what was wrong: the bad item, the limit, or the flag."""
    assert "abc" in _run(["trace", "--input", "1, abc"], capsys)[2]
    assert "48" in _run(["trace", "--layers", "49"], capsys)[2]
    assert "512" in _run(["trace", "--d-model", "513"], capsys)[2]
    assert "--attention-scale" in _run(["trace", "--attention-scale", "nan"], capsys)[2]
    assert "divisible" in _run(["trace", "--heads", "3"], capsys)[2]


def _subprocess(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "blocktrace.app.cli", "trace", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_real_process_prints_json() -> None:
    """`python -m blocktrace.app.cli trace --json` in a real process exits 0 and prints parseable JSON on stdout."""
    done = _subprocess("--preset", "eat-an-orange", "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert json.loads(done.stdout)["tokens"] == ["eat", "an", "orange"]


def test_real_process_bad_input_exits_2() -> None:
    """A bad vector in a real process exits 2 with one `error:` line and no traceback."""
    done = _subprocess("--input", "1e400, 2")
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("error:")
    assert "Traceback" not in done.stderr


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`blocktrace --version` names the version pip recorded for the installed distribution."""
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"blocktrace {version('blocktrace')}"


def test_lessons_missing_from_an_installation_are_an_error(tmp_path) -> None:
    """A data folder without lessons raises a message naming it (it had left the lesson list silently empty)."""
    from blocktrace.app.lessons.loading import load_lessons

    with pytest.raises(FileNotFoundError, match="lessons"):
        load_lessons(tmp_path)


# --- `blocktrace serve`: its help, its banner, the teacher password ---------------------------------------------


def test_serve_help_says_what_the_password_flags_do(capsys: pytest.CaptureFixture[str]) -> None:
    """The help tells how the teacher password is chosen and kept, and names --new-password and --access-log."""
    code, out, _err = _run(["serve", "--help"], capsys)
    text = " ".join(out.split())
    assert code == 0
    assert "the server makes one the first time, keeps it in the data folder (file teacher-password)" in text
    assert "--new-password replace the teacher password kept in the data folder" in text
    assert "--access-log log every request" in text
    assert "beyond this machine" not in text  # what the help said before: never what the server did


def _classroom(source: str, password: str = "Kept-password1") -> Classroom:
    return Classroom([], b"s" * 32, Path("/srv/blocktrace-data"), password, source)


@pytest.mark.parametrize(("address", "lan", "students"), [
    ("127.0.0.1", None, ["http://127.0.0.1:5006/   (this computer only: start with --address 0.0.0.0 to let the "
                         "class in)"]),
    ("0.0.0.0", ["192.168.1.23", "10.0.0.4"], ["http://192.168.1.23:5006/", "http://10.0.0.4:5006/"]),
    ("0.0.0.0", [], ["http://THIS-COMPUTER'S-ADDRESS:5006/ (no network address found: is it connected?)"]),
    ("192.168.1.23", None, ["http://192.168.1.23:5006/"]),
    ("fd00::17", None, ["http://[fd00::17]:5006/"]),
])
def test_the_banner_gives_the_addresses_students_can_use(address: str, lan, students: list[str]) -> None:
    """On 0.0.0.0 the students' addresses are this computer's network addresses, one a line."""
    lines = banner(address, 5006, _classroom("/srv/blocktrace-data/teacher-password"), lan).splitlines()
    assert lines[0] == "blocktrace is ready (Ctrl-C stops it)."
    assert [line[18:] for line in lines[1:1 + len(students)]] == students
    own = {"192.168.1.23": "192.168.1.23", "fd00::17": "[fd00::17]"}.get(address, "127.0.0.1")
    assert lines[1 + len(students)] == f"  Teacher room:   http://{own}:5006/teacher"


@pytest.mark.parametrize(("address", "given", "accepted"), [
    ("127.0.0.1", [], ["localhost:5006", "127.0.0.1:5006"]),
    ("0.0.0.0", [], ["localhost:5006", "127.0.0.1:5006", "192.168.1.23:5006", "10.0.0.4:5006"]),
    ("0.0.0.0", ["class.example.org"], ["localhost:5006", "127.0.0.1:5006", "192.168.1.23:5006", "10.0.0.4:5006",
                                        "class.example.org"]),
    ("192.168.1.23", [], ["localhost:5006", "127.0.0.1:5006", "192.168.1.23:5006"]),
    ("fd00::17", [], ["localhost:5006", "127.0.0.1:5006", "[fd00::17]:5006"]),
])
def test_the_server_accepts_the_pages_of_every_address_the_banner_gives(address: str, given: list[str],
                                                                       accepted: list[str]) -> None:
    """A student who opens an address the banner printed gets a page whose websocket is accepted: on 0.0.0.0 this
    computer's network addresses are accepted origins without --allow-websocket-origin."""
    args = build_parser().parse_args(["serve", "--address", address, *sum((["--allow-websocket-origin", g]
                                                                          for g in given), [])])
    assert websocket_origins(args, ("192.168.1.23", "10.0.0.4")) == accepted


@pytest.mark.parametrize(("source", "shown"), [
    ("/srv/blocktrace-data/teacher-password", "Kept-password1   (kept in /srv/blocktrace-data/teacher-password; "
                                              "--new-password makes a new one)"),
    ("--teacher-password", "the one given by --teacher-password"),
    ("BLOCKTRACE_TEACHER_PASSWORD", "the one given by BLOCKTRACE_TEACHER_PASSWORD"),
])
def test_the_banner_shows_only_a_password_the_server_made(source: str, shown: str) -> None:
    """A kept password is shown with where it is kept; one the teacher gave is named by where it came from."""
    text = banner("127.0.0.1", 5006, _classroom(source), [])
    assert f"  Password:       {shown}" in text.splitlines()
    assert ("Kept-password1" in text) == source.startswith("/")  # only the password the server made
    assert text.splitlines()[-1] == "  Data folder:    /srv/blocktrace-data"


def test_the_banner_without_a_classroom_says_nothing_is_kept() -> None:
    lines = banner("127.0.0.1", 5006, None, []).splitlines()
    assert lines[-1] == "  Records:        none (--no-classroom): no teacher's room, nothing is kept"
    assert not any("Password" in line or "Teacher" in line for line in lines)


@pytest.mark.parametrize(("flag", "env", "new", "expected"), [
    ("from-flag", "from-env", False, ("from-flag", "--teacher-password")),
    (None, "from-env", False, ("from-env", "BLOCKTRACE_TEACHER_PASSWORD")),
    (None, None, False, ("kept", "file")),
    ("from-flag", None, True, "--new-password makes a password of its own; the password is given by "
                              "--teacher-password"),
    (None, "from-env", True, "--new-password makes a password of its own; the password is given by "
                             "BLOCKTRACE_TEACHER_PASSWORD"),
])
def test_a_given_password_comes_before_the_kept_one(tmp_path, monkeypatch, flag, env, new, expected) -> None:
    """--teacher-password, then BLOCKTRACE_TEACHER_PASSWORD, then the kept file; --new-password with a given
    password is an error that says which one."""
    from blocktrace.app.classroom.login_guard import PASSWORD_FILE
    from blocktrace.app.serve import teacher_password

    (tmp_path / PASSWORD_FILE).write_text("kept\n")
    if env is None:
        monkeypatch.delenv("BLOCKTRACE_TEACHER_PASSWORD", raising=False)
    else:
        monkeypatch.setenv("BLOCKTRACE_TEACHER_PASSWORD", env)
    args = build_parser().parse_args(["serve", *([f"--teacher-password={flag}"] if flag else []),
                                      *(["--new-password"] if new else [])])
    if isinstance(expected, str):
        with pytest.raises(ValueError, match=re.escape(expected)):
            teacher_password(args, tmp_path)
        assert (tmp_path / PASSWORD_FILE).read_text() == "kept\n"  # nothing was replaced
    else:
        password, source = teacher_password(args, tmp_path)
        assert (password, source) == (expected[0], str(tmp_path / PASSWORD_FILE) if expected[1] == "file"
                                      else expected[1])
