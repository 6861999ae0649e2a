"""Every example of README.md and docs/ has a test that runs it (tests/documented.py says how each is
run). Here, without the lab: none is left without a way to be run, the `laglab` ones parse as written,
the make targets exist, and what needs a Kubernetes cluster is checked as far as it can be offline.
The lab's examples run in tests/integration/test_documented_examples.py."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ..documented import ELSEWHERE, ROOT, examples, help_rules, parse_cli, rule, same_command

ALL = examples()
# What a cluster example runs that cannot be checked without a cluster or a registry: kubectl's verbs
# against the API server, docker push. Stated, not checked.
NEEDS_A_CLUSTER = re.compile(r"^(kubectl -n laglab (port-forward|get|logs|scale|delete|exec|cp)\b|docker push\b)")


def by_kind(kind: str) -> list:
    return [e for e in ALL if (r := rule(e)) is not None and r.kind == kind]


def test_every_example_has_a_way_to_be_run():
    assert len(ALL) > 60, len(ALL)
    unrun = [str(e) for e in ALL if rule(e) is None]
    assert not unrun, "examples no test runs (add a rule in tests/documented.py):\n" + "\n".join(unrun)
    assert {rule(e).kind for e in ALL} == {"lab", "elsewhere", "dry-run", "cluster", "started"}


def test_the_extraction_reads_a_page_as_a_shell_does(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text("")
    (tmp_path / "README.md").write_text(
        "text\n```sh\n# a comment\n./laglab shape --link a b \\\n    --rtt 1ms   # why\n\n```\n"
        "```yaml\nname: x\n```\n```sh\nmake help\n```\n"
    )
    got = [(e.page, e.line, e.block, e.command) for e in examples(tmp_path) if e.page == "README.md"]
    assert got == [
        ("README.md", 4, 0, "./laglab shape --link a b --rtt 1ms   # why"),
        ("README.md", 12, 2, "make help"),
    ]


@pytest.mark.parametrize("example", [e for e in ALL if e.command.startswith("./laglab ")], ids=str)
def test_every_laglab_example_parses_as_written(example, monkeypatch, tmp_path):
    """From the checkout's root, as a user runs them; a file an earlier example writes (`scenario new`'s)
    or a placeholder (`results/<run>`) is made in a scratch copy of the path."""
    monkeypatch.chdir(ROOT)
    for part in example.command.split("&&"):
        args = shlex.split(part, comments=True)
        if args[0] != "./laglab":
            continue  # make run, kubectl: checked with their kind
        fixed = []
        for arg in args[1:]:
            if arg == "results/<run>" or arg == "scenarios/ticket-4711.yaml":
                scratch = tmp_path / arg.replace("<run>", "RUN")
                scratch.parent.mkdir(parents=True, exist_ok=True)
                scratch.mkdir() if arg.startswith("results/") else scratch.write_text("name: x\n")
                arg = str(scratch)
            fixed.append(arg)
        command = parse_cli(fixed)  # click's UsageError when it does not parse as written
        assert command.name in fixed, (example, command.name)  # resolved to the command it names, not a group


def test_what_other_tests_run_they_run_as_written():
    for example in by_kind("elsewhere"):
        (pattern,) = [p for p in ELSEWHERE if re.search(p, example.command)]
        source = (ROOT / ELSEWHERE[pattern]).read_text()
        if pattern.startswith("^make up"):
            assert re.search(r"^\s*make up\b|make -s up|\bmake up\b", source, re.M), ELSEWHERE[pattern]
            continue
        scenario = re.search(r"scenarios/([\w-]+)\.yaml", example.command).group(1)
        assert f'run_scenario("{scenario}")' in source and '"--quick"' in source, (example, ELSEWHERE[pattern])


@pytest.mark.parametrize("example", by_kind("dry-run"), ids=str)
def test_make_targets_that_take_the_lab_away_exist(example):
    target = shlex.split(example.command, comments=True)
    done = subprocess.run(["make", "-n", *target[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), f"{example}: make -n printed nothing"


def edited_everywhere(kubectl: str, folder, images: dict[str, str], tmp_path) -> None:
    """`kustomize edit set image NAME=REGISTRY/...:TAG` in `folder` (the standalone kustomize, not here)
    writes NAME's newName and newTag into that folder's `images:` (kustomize's
    commands/edit/set/setimage.go); done so in a scratch copy of deploy/kubernetes, every overlay then
    runs exactly those images: the folder is the one place that names them."""
    copy = tmp_path / "kubernetes"
    shutil.copytree(ROOT / "deploy/kubernetes", copy)
    edited = copy / folder.relative_to(ROOT / "deploy/kubernetes") / "kustomization.yaml"
    spec = yaml.safe_load(edited.read_text())
    assert {i["name"] for i in spec["images"]} == set(images), (folder, spec.get("images"))
    spec["images"] = [
        {"name": n, "newName": v.rsplit(":", 1)[0], "newTag": v.rsplit(":", 1)[1]} for n, v in images.items()
    ]
    edited.write_text(yaml.safe_dump(spec))
    for overlay in sorted((copy / "overlays").iterdir()):
        done = subprocess.run([kubectl, "kustomize", str(overlay)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        ran = set(re.findall(r"image: (\S+)", done.stdout))
        assert set(images.values()) <= ran and not {i for i in ran if i.startswith("laglab/")}, (overlay.name, ran)


@pytest.mark.skipif(shutil.which("kubectl") is None and not (ROOT / ".cache/bin/kubectl").exists(),
                    reason="scripts/test installs kubectl before the unit tests")  # fmt: skip
@pytest.mark.parametrize("example", by_kind("cluster"), ids=str)
def test_cluster_examples_as_far_as_they_can_be_checked_offline(example, monkeypatch, tmp_path):
    """Only a cluster can show that the pods start, that Chaos Mesh injects, that port-forward and
    kubectl cp work (docs/kubernetes.md says what was tried where). Here: every overlay applied renders
    with kubectl's kustomize, every Dockerfile built exists, the images set by `kustomize edit` are the
    ones the base names, the laglab commands parse, and the rest is one of the verbs that need the API."""
    monkeypatch.chdir(ROOT)
    kubectl = shutil.which("kubectl") or str(ROOT / ".cache/bin/kubectl")
    command = re.sub(r"^\(|\)$", "", example.command.split(" #")[0].strip())
    where = ROOT
    for part in (p.strip() for p in re.split(r"&&|;", command)):
        if part.startswith("cd "):
            where = ROOT / part[3:].strip() if part[3:].strip() != "-" else ROOT
            continue
        if not part:
            continue
        if m := re.fullmatch(r"kubectl apply -k (\S+)", part):
            done = subprocess.run([kubectl, "kustomize", m[1]], capture_output=True, text=True, timeout=120)
            assert done.returncode == 0 and "kind: " in done.stdout, done.stderr
        elif m := re.fullmatch(r"docker build -t REGISTRY/\S+ -f (\S+) \.", part):
            assert (ROOT / m[1]).is_file(), m[1]
        elif part.startswith("kustomize edit set image "):
            edited_everywhere(kubectl, where, dict(re.findall(r"(\S+?)=(REGISTRY/\S+)", part)), tmp_path)
        elif part.startswith("./laglab "):
            parse_cli(shlex.split(part)[1:])
        elif m := re.fullmatch(r"make run SCENARIO=(\S+)", part):
            assert (ROOT / m[1]).is_file()
            assert (
                subprocess.run(["make", "-n", "run", f"SCENARIO={m[1]}"], capture_output=True, timeout=60).returncode
                == 0
            )
        elif part.startswith("export LAB_API_TOKEN=$(kubectl"):
            assert "/var/lib/laglab/api-token" in part  # where the controller writes its token (api.md)
        else:
            assert NEEDS_A_CLUSTER.match(part), f"{example}: {part!r} is neither checked here nor a cluster verb"


HELPS = help_rules()


def test_every_help_example_has_a_way_to_be_run():
    """#36.2: the --help examples are run too (the lab's in the integration examples test)."""
    kinds = {r.kind for _e, r, _w in HELPS}
    assert len(HELPS) > 50 and kinds == {"lab", "same", "members", "completion"}, kinds
    runs_here = {same_command(e.command) for e in ALL if rule(e).kind in ("lab", "started")}
    runs_here |= {same_command(e.command) for e, r, _w in HELPS if r.kind == "lab"}
    for example, r, where in HELPS:
        if r.kind == "same":  # named, and that one runs exactly this command
            assert where and same_command(where.split(": ", 1)[1]) == same_command(example.command) in runs_here
    members = [e for e, r, _w in HELPS if r.kind == "members"]
    source = (ROOT / "controller/tests/integration/test_clusters.py").read_text()
    assert members and "help_rules()" in source and '"members"' in source, members


def test_the_completion_examples_as_written(tmp_path):
    """`source <(laglab completion bash)` in a real bash, then a TAB as bash's programmable completion
    makes it (COMP_WORDS, COMP_CWORD, the function `complete -p laglab` names): `laglab fault ki` ->
    kill, with the installed command and with ./laglab. zsh is not on this machine: its example is run
    by bash (fpath as an array whose second entry, zsh's ${fpath[1]}, is a scratch folder) and the file
    it writes is checked to be a zsh completion (#compdef laglab); loading it needs zsh."""
    (bash, zsh) = [e.command for e, r, _w in HELPS if r.kind == "completion"]
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}  # the venv's laglab
    for word in ("laglab", "./laglab"):
        script = (f"{bash}\nf=$(complete -p laglab | sed 's/.* -F \\([^ ]*\\) .*/\\1/')\n"
                  f'COMP_WORDS=({word} fault ki); COMP_CWORD=2; COMPREPLY=(); "$f" {word}; echo "${{COMPREPLY[@]}}"')  # fmt: skip
        done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.split() == ["kill"], (word, done.stdout, done.stderr)
    script = f"fpath=(/usr/share/zsh/functions {tmp_path})\n{zsh}"
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "_laglab").read_text().startswith("#compdef laglab\n")
