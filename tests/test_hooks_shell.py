"""The Bash analyser behind the PreToolUse rules (taskgate.hooks.shell): what may be written."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from taskgate.hooks.shell import analyse

CWD = "/r"


def writes(command: str, cwd: str = CWD) -> set[str]:
    """The paths `command` may write."""
    return analyse(command, cwd, home="/home/u").writes


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo hi > out.txt", {"/r/out.txt"}),
        ("echo hi >> log", {"/r/log"}),
        ("make 2> err.log", {"/r/err.log"}),
        ("make &> all.log", {"/r/all.log"}),
        ("make >& all.log", {"/r/all.log"}),
        ("ls > /dev/null 2>&1", set()),
        ("cat < in.txt", set()),
        ("ls | tee -a a.log b.log", {"/r/a.log", "/r/b.log"}),
        ("cp a.txt b.txt", {"/r/b.txt", "/r/b.txt/a.txt"}),
        ("cp -r src -t dest", {"/r/dest", "/r/dest/src"}),
        ("mv old new", {"/r/new", "/r/new/old", "/r/old"}),
        ("rm -rf build dist", {"/r/build", "/r/dist"}),
        ("touch a; mkdir -p b/c", {"/r/a", "/r/b/c"}),
        ("ln -s /etc/passwd link", {"/r/link", "/r/link/passwd"}),
        ("install -m 644 f /usr/local/f", {"/usr/local/f", "/usr/local/f/f"}),
        ("truncate -s 0 big.log", {"/r/big.log"}),
        ("dd if=/dev/zero of=disk.img bs=1M", {"/r/disk.img"}),
        ("sed -i 's/a/b/' one.py two.py", {"/r/one.py", "/r/two.py"}),
        ("sed -i.bak -e s/a/b/ f.py", {"/r/f.py"}),
        ("sed 's/a/b/' f.py", set()),
        ("perl -pi -e 's/a/b/' f.pl", {"/r/f.pl"}),
        ("chmod 600 key", {"/r/key"}),
        ("~/bin/tool > ~/out", {"/home/u/out"}),
    ],
)
def test_writers(command: str, expected: set[str]) -> None:
    assert writes(command) == expected


def test_quoting_keeps_spaces_and_hides_operators() -> None:
    assert writes('echo "a && b" > "my dir/out file.txt"') == {"/r/my dir/out file.txt"}
    assert writes("echo 'x > y; rm z'") == set()
    assert writes(r"echo a\ b > c\ d") == {"/r/c d"}


def test_operators_split_commands() -> None:
    a = analyse("git status && ls || true; echo done | cat & wait\npwd", CWD)
    assert [c.argv[0] for c in a.commands] == ["git", "ls", "true", "echo", "cat", "wait", "pwd"]


def test_cd_changes_where_later_relative_paths_land(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    assert writes(f"cd {tmp_path}/sub && touch x") == {f"{tmp_path}/sub/x"}
    assert writes(f"cd {tmp_path} ; cd sub; rm y") == {f"{tmp_path}/sub/y"}


def test_a_failing_cd_keeps_the_old_directory_possible() -> None:
    # `cd /nonexistent; echo > f` writes ./f when the cd fails: both count.
    assert writes("cd /nonexistent; echo > f") == {"/nonexistent/f", "/r/f"}
    assert writes("cd /nonexistent && echo > f") == {"/nonexistent/f"}


def test_subshell_cd_does_not_leak() -> None:
    assert writes("(cd /tmp && touch a); touch b") == {"/tmp/a", "/r/b"}


def test_variables_are_followed_and_unknown_values_mark_incomplete() -> None:
    assert writes("D=.taskgate; echo > $D/state.db") == {"/r/.taskgate/state.db"}
    assert writes("export D=out; touch ${D}.txt") == {"/r/out.txt"}
    a = analyse("x=$(pwd); echo > $x/f", CWD)
    assert not a.complete
    assert a.writes == set()


def test_wrappers_and_env_prefixes_are_stripped() -> None:
    assert writes("sudo -u root env A=1 nice -n 5 rm -f /etc/x") == {"/etc/x"}
    assert writes("A=1 B=2 timeout 5 touch t") == {"/r/t"}
    assert writes("nohup command tee t.log") == {"/r/t.log"}


def test_nested_shells_and_eval_are_analysed() -> None:
    assert writes("bash -c 'rm -rf /r/q'") == {"/r/q"}
    assert writes('sh -lc "cd /tmp && echo > z"') == {"/tmp/z"}
    assert writes("eval 'touch e'") == {"/r/e"}


def test_command_substitution_runs_commands() -> None:
    assert writes("echo $(rm gone) `touch made`") == {"/r/gone", "/r/made"}
    assert writes("diff <(sort a) >(tee copy)") == {"/r/copy"}


def test_heredoc_body_is_data() -> None:
    a = analyse("cat > out <<EOF\nrm -rf /\nEOF\necho done", CWD)
    assert a.writes == {"/r/out"}
    assert [c.argv[0] for c in a.commands] == ["cat", "echo"]


def test_interpreter_code_is_opaque() -> None:
    a = analyse("python3 -c \"open('.taskgate/state.db','w')\"", CWD)
    assert a.opaque == ["open('.taskgate/state.db','w')"]
    assert analyse("node -e 'require(\"fs\")'", CWD).opaque == ['require("fs")']
    assert analyse("perl -e 'unlink q(x)'", CWD).opaque == ["unlink q(x)"]
    assert analyse("python3 script.py", CWD).opaque == []


def test_globs_expand_against_the_disk_including_dotfiles(tmp_path: Path) -> None:
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "a.log").write_text("")
    found = writes("rm -rf *", str(tmp_path))
    assert f"{tmp_path}/.hidden" in found
    assert f"{tmp_path}/a.log" in found
    assert f"{tmp_path}/x.txt" in writes("touch {x,y}.txt", str(tmp_path))


def test_find_delete_and_xargs() -> None:
    assert analyse("find build -name '*.o' -delete", CWD).dir_writes == {"/r/build"}
    assert analyse("find . -exec rm {} +", CWD).writes == {"/r/{}"}
    assert not analyse("ls | xargs rm", CWD).complete
    assert analyse("ls | xargs grep x", CWD).complete


def test_comments_and_line_continuations() -> None:
    assert writes("echo a # > not-a-file") == set()
    assert writes("echo a \\\n > b") == {"/r/b"}


def test_deep_nesting_is_incomplete_not_a_crash() -> None:
    command = "touch x"
    assert writes(f"bash -c {shlex.quote(f'bash -c {shlex.quote(command)}')}") == {"/r/x"}
    for _ in range(9):
        command = f"bash -c {shlex.quote(command)}"
    assert not analyse(command, CWD).complete  # nesting bound
    for _ in range(3):
        command = f"bash -c {shlex.quote(command)}"
    assert analyse(command, CWD).budget  # a megabyte of quoting: over budget


def test_code_read_from_stdin_is_opaque() -> None:
    heredoc = "python3 <<'EOF'\nopen('.taskgate/state.db', 'w')\nEOF"
    assert analyse(heredoc, CWD).opaque == ["open('.taskgate/state.db', 'w')"]
    assert analyse("echo 'rm -rf x' | bash", CWD).opaque == ["echo 'rm -rf x' | bash"]
    assert analyse("python3 -m pytest -q", CWD).opaque == []
    assert analyse("bash build.sh", CWD).opaque == []


def test_symlink_targets_are_reported() -> None:
    a = analyse("ln -s .taskgate/state.db x; echo > x", CWD)
    assert "/r/.taskgate/state.db" in a.link_targets
    assert "/r/x" in a.writes


def test_shell_scripts_on_disk_are_analysed_like_the_line(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "gen.sh").write_text("#!/bin/sh\nset -e\necho x > out/gen.py\nbash tools/inner.sh\n")
    (tools / "inner.sh").write_text("rm -f stale.txt\n")
    (tools / "run").write_text("#!/usr/bin/env bash\ncp a b\n")
    (tools / "plain").write_text("touch made-by-sh\n")  # no #!: run by sh
    (tools / "t.py").write_text("#!/usr/bin/env python3\nopen('x', 'w')\n")
    cwd = str(tmp_path)
    expected = {f"{cwd}/out/gen.py", f"{cwd}/stale.txt"}
    for command in ("bash tools/gen.sh", "sh -e tools/gen.sh arg", "./tools/gen.sh"):
        assert analyse(command, cwd).writes == expected, command
    assert analyse("tools/run", cwd).writes == {f"{cwd}/b", f"{cwd}/b/a"}
    assert analyse("./tools/plain", cwd).writes == {f"{cwd}/made-by-sh"}
    found = analyse("./tools/t.py && python3 tools/t.py", cwd)
    assert found.writes == set()
    assert [p for p, _ in found.scripts] == [f"{cwd}/tools/t.py"] * 2
    assert analyse("python3 -m pytest", cwd).scripts == []
    assert analyse("bash missing.sh", cwd).writes == set()


def test_scripts_that_cannot_be_read_make_the_analysis_incomplete(tmp_path: Path) -> None:
    (tmp_path / "big.sh").write_text("echo hi\n" * 40_000)
    (tmp_path / "bin.sh").write_bytes(b"\x7fELF\0\0")
    assert not analyse("bash big.sh", str(tmp_path)).complete
    assert not analyse("./bin.sh", str(tmp_path)).complete
    assert not analyse('bash "$SCRIPT"', str(tmp_path)).complete
    loop = tmp_path / "loop.sh"
    loop.write_text("bash loop.sh\n")
    assert not analyse("bash loop.sh", str(tmp_path)).complete  # nesting bound


# -- issue 15: the grammar, expansion, programs and the budget ---------------------------------


def unbounded(command: str, cwd: str = CWD) -> bool:
    """Whether some program on the line may write anything."""
    return bool(analyse(command, cwd, home="/home/u").unbounded)


@pytest.mark.parametrize(
    "command",
    [
        "{ touch x; }",
        "if true; then touch x; fi",
        "if false; then :; elif true; then :; else touch x; fi",
        "until touch x; do :; done",
        "while false; do :; done; touch x",
        "for f in a b; do touch x; done",
        "case a in a) touch x;; esac",
        "f() { touch x; }; f",
        "function g { touch x; }; g",
        "! touch x",
        "[[ -e y ]] || touch x",
        "(( 1 )) && touch x",
        "time touch x",
    ],
)
def test_compound_commands_are_walked(command: str) -> None:
    assert writes(command) == {"/r/x"}, command


def test_a_function_body_runs_where_it_is_called(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    assert writes(f"f() {{ touch x; }}; cd {tmp_path}/sub && f") == {f"{tmp_path}/sub/x"}
    assert writes("f() { touch x; }") == set()  # defined, never called


def test_ansi_c_quoting_and_line_continuations_are_decoded() -> None:
    assert writes("echo > $'\\x2e\\x2e'/x") == {"/x"}
    assert writes("echo > $'\\056'/y") == {"/r/y"}
    assert writes("touch READ\\\nME.md") == {"/r/README.md"}
    assert writes("touch {a,b}.txt") == {"/r/a.txt", "/r/b.txt"}


def test_paths_are_physical_and_follow_links_made_on_the_line(tmp_path: Path) -> None:
    target = tmp_path / "target"
    (target / "inner").mkdir(parents=True)
    (tmp_path / "link").symlink_to(target / "inner")
    cwd = str(tmp_path)
    assert writes("touch link/../x", cwd) == {f"{target}/x"}  # as the kernel resolves it
    made = analyse(f"ln -s {target} l2 && touch l2/y", cwd)
    assert f"{target}/y" in made.writes
    assert writes("cd -P link && touch z", cwd) == {f"{target}/inner/z"}


def test_cd_minus_pushd_and_popd() -> None:
    assert writes("cd /tmp && cd - && touch x") == {"/r/x"}
    assert writes("pushd /tmp && popd && touch x") == {"/r/x"}
    assert not analyse("popd; touch x", CWD).complete  # nothing was pushed on this line


def test_programs_are_read_only_only_when_known_to_be() -> None:
    for reader in ("git status", "/usr/bin/git log", ".venv/bin/python -m pytest -q", "ls -la",
                   "python3 -c 'print(open(\"a\").read())'", "node -e 'console.log(1)'",
                   "make -n", "grep -rn x . | sort | uniq -c", "awk '$3 > 1' f"):  # fmt: skip
        found = analyse(reader, CWD)
        assert found.reads_only or (not found.unbounded and not found.writes), reader
    for writer in ("make", "./configure", "python3 tool.py", "perl -e 'unlink 1'",
                   "python3 -c \"import os; os.replace('a', 'b')\"", "git -c alias.x='!sh' x",
                   "npm install", "cargo run", "vim -es f"):  # fmt: skip
        assert unbounded(writer), writer


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("sed -Ei s/a/b/ f", {"/r/f"}),
        ("sed -n 'w out' f", {"/r/out"}),
        ("sort -o out in", {"/r/out"}),
        ("uniq in out", {"/r/out"}),
        ("find . -fprint out", {"/r/out"}),
        ("cp --target-directory=d a", {"/r/d", "/r/d/a"}),
        ("tar -cf out.tar src", {"/r/out.tar"}),
        ("flock lock touch x", {"/r/lock", "/r/x"}),
        ("setsid touch x", {"/r/x"}),
        ("env -C /tmp touch x", {"/tmp/x"}),
        ("script -qc true log", {"/r/log"}),
        ("git format-patch -1 -o out", set()),
    ],
)
def test_writing_options_are_modelled(command: str, expected: set[str]) -> None:
    assert writes(command) == expected, command


def test_tar_x_and_find_delete_may_write_below_a_directory() -> None:
    assert analyse("tar -C d -xf a.tar", CWD).dir_writes == {"/r/d"}
    assert analyse("unzip a.zip -d out", CWD).dir_writes == {"/r/out"}
    assert analyse("git format-patch -1 -o out", CWD).dir_writes == {"/r/out"}


def test_the_budget_stops_fan_out_and_megabyte_lines() -> None:
    assert analyse("; ".join(f"cd x{i}" for i in range(19)) + "; touch f", CWD).budget
    assert analyse("echo " + "a" * (5 * 1024 * 1024), CWD).budget
    assert analyse("touch " + "{a,b}" * 20, CWD).budget
    assert analyse("( " * 3000 + "true" + " )" * 3000, CWD).budget
    assert not analyse("cd /tmp; cd /; cd /tmp; touch f", CWD).budget


def in_bash(line: str, where: Path, env: dict[str, str] | None = None) -> None:
    """Run `line` with the real bash in `where` (the premise a test checks first)."""
    subprocess.run(["bash", "-c", line], cwd=where, capture_output=True, env=env,
                   stdin=subprocess.DEVNULL, check=False, timeout=60)  # fmt: skip


def writes_x_in_bash(line: str, where: Path, env: dict[str, str] | None = None) -> None:
    """`line` run with the real bash in `where` writes the file x there."""
    in_bash(line, where, env)
    assert (where / "x").exists(), f"bash does not write x for {line!r}"


# -- `$((` and `((`: arithmetic only by bash's own rule, never a hiding place ------------------

HIDDEN_IN_PARENS = [  # each runs `touch x` in bash 5 (checked against bash -c in a scratch dir)
    "echo $((( 1 )) && touch x)",
    "echo $(( (1) ) ; touch x)",
    "echo $((( 1 )) || :; touch x)",
    "echo $(((1)) ; touch x)",
    "echo $((echo a) ; (touch x))",
    "x=$((echo a) ; touch x)",
    'echo "$((( 1 )) && touch x)"',
    'echo "$(( (1) ) ; touch x)"',
    "echo `echo $((( 1 )) && touch x)`",
    "cat <(echo $((( 1 )) && touch x))",
    "echo $(echo $(echo $((( 1 )) && touch x)))",
    "cd . && for i in 1; do echo $((( 1 )) && touch x); done",
    "((( 1 )) && touch x)",
    "(( 1 ) ; touch x)",
    "((echo a) ; touch x)",
    "{ (( 1 ) ; touch x ) ; }",
    "echo $(( $(touch x) 1 ))",  # arithmetic, but its substitution runs
    'echo $(( "\'" $(touch x) "\'" ))',  # a `"` is not a quote inside arithmetic
    '(( "\'" $(touch x) "\'" ))',
    "echo $(( '$(touch x)' ))",
]


@pytest.mark.parametrize("command", HIDDEN_IN_PARENS)
def test_commands_inside_parentheses_that_are_not_arithmetic_are_judged(command: str) -> None:
    assert "/r/x" in writes(command), command


def test_the_corpus_line_with_find_fprint_is_a_write() -> None:
    line = "cd . && for i in 1; do echo $((( 1 )) && find . -maxdepth 0 -fprint README.md); done"
    assert writes(line) == {"/r/README.md"}
    line = "echo $(echo $(echo $((( 1 )) && find . -maxdepth 0 -fprint README.md)))"
    assert writes(line) == {"/r/README.md"}


@pytest.mark.parametrize(
    "command",
    [
        "echo $(( (1+2) * 3 ))",
        "echo $(((1)))",
        "echo $(( 1 + (2) ))",
        "echo $((1))$((2)) > /dev/null",
        "a=$((1+2)); echo $a",
        'echo "$(( (1 + 2) * 3 ))"',
        "(( (1+2) * 3 )) && echo yes",
        "(((1)))",
        "(( x > 3 )) || echo small",
        "echo $(( x > 3 ))",
        "echo $(( RANDOM % 10 )) $(( ${#arr[@]} - 1 )) $(( a[ i + 1 ] += 2 ))",
        "echo $(( 16#ff + 64#@_ + 0x10 )) $(( x << 2 )) $(( -1 )) $(( !x ))",
        'echo $(( x ? 1 : 0 )) $(( 10 ** 3 )) $(( "$x" + 1 )) $(( x++ + 1 ))',
        "(( i++ )); (( x=1, y=2 )); echo $(( $a$b + $? ))",
        "echo $(( $(wc -l < README.md) + 1 ))",
    ],
)
def test_genuine_arithmetic_stays_arithmetic(command: str) -> None:
    # allowed; a variable known only at run time makes PostToolUse compare (runs_code)
    a = analyse(command, CWD, home="/home/u")
    assert a.reads_only, (command, a.writes, a.unbounded, a.problems)


@pytest.mark.parametrize(
    "command", ["echo $(( echo x > x ))", "(( echo x > x ))", "echo $(( (touch x) ))"]
)
def test_text_that_cannot_be_arithmetic_is_judged_as_commands_too(command: str) -> None:
    # bash fails on these without running them; another shell, or another bash, might not
    assert "/r/x" in writes(command), command


def test_arithmetic_evaluates_the_values_of_the_variables_it_names() -> None:
    # bash evaluates x's value as an expression: its subscript's $(...) runs (checked with bash)
    evil = "'a[$(touch x)]'"
    for line in [f"x={evil}; echo $((x))", f"x={evil}; (( x ))", f"x={evil}; echo $(($x))",
                 f"y={evil}; x=y; echo $((x))"]:  # fmt: skip
        assert "/r/x" in writes(line), line
    # a value known only at run time: allowed, and compared after the line (PostToolUse)
    for line in ["x=$(cat f); echo $((x))", "read x < f; (( x ))", "echo $((i + 1))"]:
        a = analyse(line, CWD, home="/home/u")
        assert a.reads_only and a.runs_code, line
    for line in ["x=3; echo $((x + 1))", "echo $(( 16#ff + 0x1f ))"]:
        a = analyse(line, CWD, home="/home/u")
        assert a.reads_only and not a.runs_code, line


# Every place bash evaluates a word as arithmetic, or a name whose subscript is arithmetic
# (bash 5.2): with x='a[$(touch x)]' each line runs `touch x`, which the test checks first.
EVALUATED = [
    "[[ $x -eq 1 ]]", "[[ 1 -ne $x ]]", "[[ x -lt 1 ]]", "[[ 1 -le x ]]", "[[ x -gt 1 ]]",
    "[[ 1 -ge x ]]", "let x", 'let "$x"', "declare -i y=x", "declare -i y=$x", "typeset -i y=x",
    "f() { local -i y=$x; }; f", "declare -i y; y=x", 'declare -a "b[$x]=1"',
    'declare -A "m[$x]=1"', "echo ${a[x]}", "echo ${#a[x]}", "echo ${!a[x]}", "echo ${a[x]:-z}",
    "echo ${v:x}", "echo ${v:1:x}", 'echo "${v: $x}"', "a[x]=1", "a[$x]=1", 'test -v "$x"',
    '[ -v "$x" ]', "[[ -v $x ]]", 'printf -v "$x" 1', 'read "$x"', 'unset "$x"',
    'unset -v "$x"', 'declare -n r="$x"; echo $r', "ref=$x; echo ${!ref}", "echo $[x]",
    "echo $[ x + 1 ]", "for ((i=x;0;)); do :; done", "echo ${a[@]:x}", "(( a[x] ))",
    'f() { local "$x"=1; }; f', 'declare "$x"=1', "a=([x]=1)", "a+=([x]=1)",
]  # fmt: skip


@pytest.mark.parametrize("line", EVALUATED)
def test_words_bash_evaluates_as_arithmetic_are_judged(line: str, tmp_path: Path) -> None:
    setup = "x='a[$(touch x)]'; a=1; v=hello; "
    subprocess.run(["bash", "-c", setup + line], cwd=tmp_path, capture_output=True,
                   stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    assert (tmp_path / "x").exists(), f"bash does not run the touch in {line!r}"
    assert "/r/x" in writes(setup + line), line
    # the same value known only at run time: allowed, and compared after the line
    a = analyse("x=$(cat f); a=1; v=hello; " + line, CWD, home="/home/u")
    assert a.runs_code and not a.writes, line


@pytest.mark.parametrize(
    "line",
    [
        "n=3; [[ $n -eq 1 ]]", "[[ 2 -gt 1 ]] && echo yes", "i=0; let i++", "echo ${a[0]}",
        "v=hello; echo ${v:1:2} ${v: -1} ${v:-default} ${#v}", "echo ${#a[@]} ${a[@]} ${!a[@]}",
        "a[0]=1; echo ${a[0]}", "declare -i n=3", "read -r line < f",
        "read -p 'go [y/n] ' ans", "mapfile -t lines < f", "unset x y; unset -f g",
        "[ -v HOME ] && test -v PATH", "printf -v out '%s' 1", "test 1 -eq 1",
        "declare -A m; m[key]=1; echo ${m[key]}", "getopts ab: opt",
        "for ((i=0; i<3; i++)); do echo $i; done", "echo $[1+2] ${!P*}", "r=HOME; echo ${!r}",
        "a=(1 2); echo ${a[0]}", "declare -a arr=(1 2)", "declare -A m=([k]=v); echo ${m[k]}",
        'local -a a=("x y" z)',
    ],
)  # fmt: skip
def test_genuine_evaluated_words_stay_pure_reads(line: str) -> None:
    a = analyse(line, CWD, home="/home/u")
    assert a.reads_only and not a.runs_code, (line, a.writes, a.unbounded, a.problems)


# `((` right after a reserved word that starts a command (if, then, else, elif, do, while,
# until, time, !, {) is bash's arithmetic command too, not two subshells: its `>` compares.
AFTER_RESERVED = [
    "if (( $# > 0 )); then ls; fi", "if ((3>2)); then echo big; fi",
    "while (( 0 > 1 )); do :; done", "until (( 2 > 1 )); do :; done",
    "if true; then (( 1 > 0 )); else (( 0 > 1 )); fi", "if false; then :; elif ((2>1)); then :; fi",
    "if ! (( 0 > 1 )); then :; fi", "{ (( 2 > 1 )); }", "time (( 2 > 1 ))",
]  # fmt: skip


@pytest.mark.parametrize("line", AFTER_RESERVED)
def test_arithmetic_after_a_reserved_word_compares_and_writes_nothing(
    line: str, tmp_path: Path
) -> None:
    in_bash(line, tmp_path)
    assert not list(tmp_path.iterdir()), f"bash wrote a file for {line!r}"
    a = analyse(line, CWD, home="/home/u")
    assert a.reads_only and not a.writes, (line, a.writes, a.problems)


@pytest.mark.parametrize(
    "line",
    [
        "if (( $(touch x) )); then :; fi", "while (( $(touch x) )); do :; done",
        "if (( a[$(touch x)] )); then :; fi", "if ((touch x) ); then :; fi",
        "if false; then :; elif (( $(touch x) )); then :; fi; if (( $(touch x) )); then :; fi",
        "y='a[$(touch x)]'; if (( y )); then :; fi", "if ((echo a) > x); then :; fi",
    ],
)  # fmt: skip
def test_commands_in_arithmetic_after_a_reserved_word_are_judged(line: str, tmp_path: Path) -> None:
    writes_x_in_bash(line, tmp_path)
    assert "/r/x" in writes(line), line


# A wrapper's options come before the command it runs; every word after the command is the
# command's own. Each line writes x in bash 5.2 with coreutils (checked first).
WRAPPED = [
    "nohup sed -i s/a/b/ x", "command sed -i s/a/b/ x", "command -p sed -i s/a/b/ x",
    "command -- sed -i s/a/b/ x", "exec sed -i s/a/b/ x", "exec -a name sed -i s/a/b/ x",
    "exec -c sed -i s/a/b/ x", "nohup find . -name x -delete", "command find . -name x -delete",
    "exec -l find . -name x -delete", "command time -o x true", "command time --output=x true",
    "builtin command sed -i s/a/b/ x",
]  # fmt: skip


@pytest.mark.parametrize("line", WRAPPED)
def test_a_wrapped_command_keeps_its_options(line: str, tmp_path: Path) -> None:
    target = tmp_path / "x"
    target.write_text("a\n")
    in_bash(line, tmp_path)
    assert not target.exists() or target.read_text() != "a\n", f"bash left x alone: {line!r}"
    a = analyse(line, CWD, home="/home/u")
    assert "/r/x" in a.writes or "/r" in a.dir_writes, (line, a.writes, a.dir_writes)


@pytest.mark.parametrize(
    "line",
    [
        "command -v python3", "command -V rm", "command -pv git", "command -v python3 && ls",
        "command python3 --version", "nohup ls -la", "builtin echo -e hi", "command time -p ls",
        "command time -f %e ls", "exec 2>/dev/null",
    ],
)  # fmt: skip
def test_a_wrapper_that_runs_nothing_or_only_reads_stays_a_pure_read(line: str) -> None:
    a = analyse(line, CWD, home="/home/u")
    assert a.reads_only and not a.unbounded, (line, a.writes, a.unbounded)


# Builtins that write a file or run command text (bash 5.2): each line writes x (checked).
BUILTIN_EFFECTS = [
    'history -s "print(1)"; history -w x', "history -s a; history -a x",
    "compgen -C 'touch x' y", "f() { touch x; }; compgen -F f y",
    "mapfile -C 'touch x #' -c 1 a <<< z", "readarray -c 1 -tC 'touch x #' a <<< z",
]  # fmt: skip


@pytest.mark.parametrize("line", BUILTIN_EFFECTS)
def test_builtins_that_write_or_run_command_text_are_judged(line: str, tmp_path: Path) -> None:
    writes_x_in_bash(line, tmp_path)
    a = analyse(line, CWD, home="/home/u")
    assert "/r/x" in a.writes and not a.reads_only, (line, a.writes, a.unbounded)


# git run through its environment or its tool options: each line writes x in a scratch
# repository holding one change (checked), so none is a pure read.
GIT_RUNS = [
    "GIT_EXTERNAL_DIFF='touch x #' git diff",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch x #' git status",
    "GIT_CONFIG_PARAMETERS=\"'core.fsmonitor'='touch x #'\" git status",
    "export GIT_EXTERNAL_DIFF='touch x #'; git diff",
    "printf '[core]\\n\\tfsmonitor = touch x #\\n' > c; GIT_CONFIG_GLOBAL=$PWD/c git status",
    "mkdir h; printf '[core]\\n\\tfsmonitor = touch x #\\n' > h/.gitconfig; HOME=$PWD/h git status",
    "git grep --open-files-in-pager='touch x #' a", "git grep -O'touch x #' a",
    "git difftool -y -x 'touch x #'", "GIT_TRACE2=$PWD/x git status",
    "git clone -q . x", "git init -q x", "git worktree add -q x",
]  # fmt: skip


@pytest.mark.parametrize("line", GIT_RUNS)
def test_git_run_through_its_environment_or_tools_is_no_pure_read(
    line: str, tmp_path: Path
) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    setup = "git init -q && echo a > README.md && git add . && git commit -qm i"
    setup += " && echo b >> README.md"
    subprocess.run(setup, shell=True, cwd=tmp_path, env=env, check=True)
    writes_x_in_bash(line, tmp_path, env)
    a = analyse(line, CWD, home="/home/u")
    assert not a.reads_only, (line, a.writes, a.unbounded)


@pytest.mark.parametrize(
    "line",
    [
        "git status", "GIT_TRACE=1 git status", "GIT_PAGER=cat git log", "git worktree list",
        "history", "history -c", "mapfile -t a < f", "compgen -W 'a b' a", "enable -n echo",
        "git grep -n foo", "git -C src status",
    ],
)  # fmt: skip
def test_their_plain_forms_stay_pure_reads(line: str) -> None:
    a = analyse(line, CWD, home="/home/u")
    assert a.reads_only and not a.runs_code, (line, a.writes, a.unbounded)


# Environments that make any program load code they name (each line writes x, checked with
# bash, node and perl; LD_PRELOAD's loading is the dynamic loader's own).
LOADED = [
    "BASH_ENV=./evil.sh bash -c true", "export BASH_ENV=./evil.sh; bash -c true",
    "NODE_OPTIONS='--require ./evil.js' node -e 0", "PERL5OPT=-Mevil PERL5LIB=. perl -e 1",
]  # fmt: skip


@pytest.mark.parametrize("line", LOADED)
def test_an_environment_that_loads_code_is_unbounded(line: str, tmp_path: Path) -> None:
    (tmp_path / "evil.sh").write_text("touch x\n")
    (tmp_path / "evil.js").write_text("require('fs').writeFileSync('x', '')\n")
    (tmp_path / "evil.pm").write_text("package evil; open(my $f, '>', 'x'); 1;\n")
    writes_x_in_bash(line, tmp_path)
    a = analyse(line, CWD, home="/home/u")
    assert a.unbounded and not a.reads_only, (line, a.unbounded)


def test_library_preloading_and_search_paths() -> None:
    for line in ["LD_PRELOAD=/tmp/x.so true", "env LD_AUDIT=/tmp/x.so ls", "LD_LIBRARY_PATH=. ls"]:
        assert analyse(line, CWD, home="/home/u").unbounded, line
    a = analyse("PYTHONPATH=. python3 -c 'import json'", CWD, home="/home/u")
    assert a.runs_code  # ./json.py would shadow the standard library's: compared after
    for line in ["ENV=staging; echo $ENV", "LANG=C ls", "TZ=UTC date"]:
        a = analyse(line, CWD, home="/home/u")
        assert a.reads_only and not a.runs_code, line


# Paths the kernel resolves for the process that opens them: the analyser's own process would
# find another place than the command's (each line writes x in the line's directory in bash).
PER_PROCESS = [
    "exec 3<.; echo x > /dev/fd/3/x", "echo x > /proc/self/cwd/x", "echo x | tee /proc/self/cwd/x",
    "cd /proc/self/cwd && echo x > x", "mkdir -p sub; exec 4<sub; echo x > /dev/fd/4/../x",
]  # fmt: skip


@pytest.mark.parametrize("line", PER_PROCESS)
def test_a_path_through_proc_or_a_descriptor_is_unbounded(line: str, tmp_path: Path) -> None:
    writes_x_in_bash(line, tmp_path)
    a = analyse(line, CWD, home="/home/u")
    assert a.unbounded and not a.reads_only, (line, a.writes, a.unbounded)
    for plain in ["echo x > /dev/fd/1", "echo x 2>/dev/fd/2", "cat /proc/cpuinfo", "ls /proc/self"]:
        assert analyse(plain, CWD, home="/home/u").reads_only, plain


# The words of input redirections are expanded too, a here-string is no here-document, stdin can
# be sourced, and `hash -p` renames a program (each line writes x in bash, checked).
INPUTS = [
    "cat <<< $(touch x)", "cat <<< \"$(touch x)\"", "cat <<< `touch x`",
    "cat < $(touch x; echo /dev/null)", "source /dev/stdin <<< 'touch x'",
    ". /dev/stdin <<< 'touch x'", "hash -p /usr/bin/touch ls; ls x",
]  # fmt: skip


@pytest.mark.parametrize("line", INPUTS)
def test_what_feeds_a_command_is_judged_too(line: str, tmp_path: Path) -> None:
    writes_x_in_bash(line, tmp_path)
    a = analyse(line, CWD, home="/home/u")
    assert not a.reads_only, (line, a.writes, a.unbounded)
    for plain in ["cat <<< hello", "cat < README.md", "grep -c a <<< 'a b'", "hash -r"]:
        assert analyse(plain, CWD, home="/home/u").reads_only, plain


@pytest.mark.parametrize("line", ["rg --pre ./pre.sh pat", "rg --pre=./pre.sh pat ."])
def test_a_search_that_runs_a_preprocessor_is_unbounded(line: str, tmp_path: Path) -> None:
    (tmp_path / "pre.sh").write_text('#!/bin/sh\ntouch x\ncat "$1"\n')
    (tmp_path / "pre.sh").chmod(0o755)
    (tmp_path / "notes.txt").write_text("pat\n")
    writes_x_in_bash(line, tmp_path)
    assert analyse(line, CWD, home="/home/u").unbounded, line


def test_read_list_programs_with_options_that_write_or_change_the_system() -> None:
    # each option as the program's manual describes it: a log file, a compiled magic file,
    # the clock, the host's name, the kernel's ring buffer, the journal's files
    for line in ["less -o x a", "less -Ro x a", "file -C -m magic", "date -s now",
                 "date --set=now", "hostname evil", "dmesg -c", "dmesg --clear",
                 "journalctl --vacuum-size=1M", "journalctl --rotate",
                 "dc -e '!touch x'"]:  # fmt: skip
        assert not analyse(line, CWD, home="/home/u").reads_only, line
    for line in ["rg -n pat src", "less -R a", "file a", "date +%Y", "date -Iseconds",
                 "hostname -I", "dmesg -T", "journalctl -u x --since today"]:  # fmt: skip
        a = analyse(line, CWD, home="/home/u")
        assert a.reads_only and not a.runs_code, line


def test_a_test_builtin_compares_integers_without_evaluating() -> None:
    # `[ "$x" -eq 1 ]` and `test` only parse integers (bash 5.2): no touch, nothing to compare
    a = analyse("x='a[$(touch x)]'; [ \"$x\" -eq 1 ]", CWD, home="/home/u")
    assert a.reads_only and not a.runs_code


def test_the_header_of_an_arithmetic_for_loop_is_walked() -> None:
    # bash runs the touch (checked); the header's tokens used to be skipped unread
    assert "/r/x" in writes("for (( i = $(touch x); i < 3; i++ )); do :; done")
    assert "/r/x" in writes("for ((;;)) { touch x; break; }")


def test_a_compound_array_assignment_is_one_assignment() -> None:
    # `a=(...)` was `a=` then a subshell running the program `1`; its elements expand
    assert writes("a=($(touch x) 2)") == {"/r/x"}
    assert writes("declare -a a=(`touch x`)") == {"/r/x"}
