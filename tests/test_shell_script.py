"""The job-script lexer: words, continuations, heredocs and static expansion on the shell
constructs that made bashlex refuse whole scripts (arrays, [[ ]], $(( )), case, time)."""

from __future__ import annotations

from runner.shell_script import Expander, parse


def words(text: str) -> list[list[str]]:
    return [[w.raw for w in c.words] for c in parse(text).commands]


def test_constructs_bashlex_refuses_do_not_lose_the_rest() -> None:
    text = ("a=(x y)\n[[ -n $X ]] && echo y\nP=$((29500 + 1))\ncase $x in a) echo 1;; esac\n"
            "time srun hostname\nsrun apptainer exec img.sif torchrun t.py\n")
    commands = words(text)
    assert ["a=(x y)"] in commands
    assert ["P=$((29500 + 1))"] in commands
    assert ["srun", "hostname"] in commands  # `time` is a reserved word, not the command
    assert commands[-1] == ["srun", "apptainer", "exec", "img.sif", "torchrun", "t.py"]


def test_quotes_substitutions_and_continuations_stay_one_word() -> None:
    text = ('H=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
            "srun apptainer exec \\\n  --bind '/a b':/c \\\n  \"$IMG\" python -c 'print(1)'  # comment\n")
    commands = parse(text).commands
    assert [w.raw for w in commands[0].words] == ['H=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)']
    second = commands[1]
    assert [w.raw for w in second.words] == ["srun", "apptainer", "exec", "--bind", "'/a b':/c", '"$IMG"', "python",
                                             "-c", "'print(1)'"]
    assert [w.line for w in second.words][-1] == 4  # line numbers survive continuations
    assert [c.text for c in parse(text).comments] == [" comment"]


def test_heredoc_body_is_attached_not_parsed_as_commands() -> None:
    text = "cat > run.sh <<'EOF'\ntorchrun --nnodes=2 t.py\nEOF\nsrun bash run.sh\n"
    commands = parse(text).commands
    assert [[w.raw for w in c.words] for c in commands] == [["cat"], ["srun", "bash", "run.sh"]]
    assert commands[0].heredocs[0].body == "torchrun --nnodes=2 t.py\n" and commands[0].heredocs[0].quoted
    assert commands[1].line == 4


def test_expansion_resolves_what_the_script_sets_and_names_the_rest() -> None:
    e = Expander(environment={"HOME": "/home/u"})
    e.assign("LIB=/opt/cray/libfabric/1.22.0")
    e.assign("arr=(-B /a:/b)")
    assert e.one("${LIB}/lib64:/opt/libfabric/lib").text == "/opt/cray/libfabric/1.22.0/lib64:/opt/libfabric/lib"
    assert [v.text for v in e.fields('"${arr[@]}"')] == ["-B", "/a:/b"]
    home = e.one("~/x")
    assert home.text == "/home/u/x" and home.from_environment == ("HOME",)
    port = e.one('"1${SLURM_JOB_ID:0-4}"')
    assert not port.resolved and "SLURM_JOB_ID" in port.unresolved
    assert e.one("${NOT_SET:-fallback}").text == "fallback"
    assert e.one("${SLURM_GPUS_ON_NODE:-4}").unresolved == ("SLURM_GPUS_ON_NODE",)  # the job decides
    assert e.one("$(hostname)").unresolved == ("$(...)",)
    assert e.one("'$LIB'").text == "$LIB"  # single quotes stay literal
