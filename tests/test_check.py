"""`python -m torchrec_cloud check` as a user runs it: on a stack file, with no Pulumi CLI,
backend or credentials on this machine (none is installed here). Most tests run the console
entry's function in this process (`check`); a real process gives the same bytes
(test_check_as_a_process_...) and closes its pipe as a shell would (test_a_reader_...).

Each mistake a new user made is refused with exit status 1 and one line naming the setting,
the value, what is allowed and how to fix it; the shipped stack files after the user's
configure step pass and print the machines.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.config_commands import run_config_command
from tests.harness import PROJECT, STACKS, USER_API_CIDRS, USER_GCP_PROJECT, shipped_stack_config

ROOT = Path(__file__).resolve().parent.parent


def _merge(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        merged = copy.deepcopy(base)
        for key, value in override.items():
            # trainerArgs are replaced whole: a case states every flag the pod gets
            merged[key] = (copy.deepcopy(value) if key == "trainerArgs"
                           else _merge(merged.get(key), value))
        return merged
    return copy.deepcopy(override)


def configured(stack: str) -> dict[str, Any]:
    """The shipped stack file's config after the README's configure step."""
    config = shipped_stack_config(stack)
    config = _merge(config, {f"{PROJECT}:kubernetes": {"apiAccessCidrs": USER_API_CIDRS}})
    if stack == "gcp":
        config = _merge(config, {f"{PROJECT}:gcp": {"project": USER_GCP_PROJECT}})
    return config


def write_stack(tmp_path: Path, stack: str, overrides: dict[str, Any] | None = None) -> Path:
    config = configured(stack)
    for key, value in (overrides or {}).items():
        full = f"{PROJECT}:{key}"
        config[full] = _merge(config.get(full), value)
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return path


def check_process(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m torchrec_cloud check ARGS` as a real process: the console entry itself."""
    return subprocess.run([sys.executable, "-m", "torchrec_cloud", "check", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def check(*args: str) -> subprocess.CompletedProcess[str]:
    """`torchrec-cloud check ARGS` in this process, through the console entry's own function
    (guarded: its exit statuses), with the exit status, stdout and stderr a process would give;
    an uncaught exception is printed as Python prints it (a test asserting no traceback sees
    one). Saves a Python start and the imports per call (check_process for the real one)."""
    import contextlib
    import io
    import signal
    import traceback

    from infra.settings import errors
    from torchrec_cloud.__main__ import guarded

    out, err = io.StringIO(), io.StringIO()
    stack, sigterm = errors._stack, signal.getsignal(signal.SIGTERM)
    try:
        with contextlib.chdir(ROOT), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            try:
                code = guarded(["check", *args])
            except SystemExit as done:  # argparse's refusals
                code = done.code if isinstance(done.code, int) else (done.code is not None)
                if isinstance(done.code, str):
                    print(done.code, file=sys.stderr)
            except Exception:  # noqa: BLE001 (as the interpreter would end the process)
                traceback.print_exc()
                code = 1
    finally:
        errors.use_stack(stack)
        signal.signal(signal.SIGTERM, sigterm)
    return subprocess.CompletedProcess(["check", *args], int(code), out.getvalue(),
                                       err.getvalue())


def test_no_pulumi_cli_is_needed_here() -> None:
    assert shutil.which("pulumi") is None, "this test proves nothing where the Pulumi CLI is"


# (id, stack, overrides, setting, value as printed, what the line must say: allowed and fix)
MISTAKES = [
    ("batchsize", "aws", {"job": {"trainerArgs": {"batchsize": 4}}},
     "job.trainerArgs.batchsize", "4", ["did you mean 'batch_size'?", ".venv/bin/python -m trainer --help"]),
    ("batch-size-lots", "gcp", {"job": {"trainerArgs": {"batch_size": "lots"}}},
     "job.trainerArgs.batch_size", "'lots'", ["an integer", "its default is 512"]),
    ("region-us-east-9", "aws", {"region": "us-east-9"}, "region", "'us-east-9'",
     ["did you mean 'us-east-1'?", "closest first: us-east-1, us-east-2",
      "pulumi config set --stack aws region us-east-1"]),
    ("azure-region-mars-central", "azure", {"region": "mars-central"}, "region",
     "'mars-central'", ["one of the Azure regions, closest first: qatarcentral, uaecentral,",
                        "(and 56 more in infra/regions.py",
                        "set the region you meant with `pulumi config set --stack azure region "
                        "<region>`"]),
    # Another cloud's region: the same metro on this cloud, with its command (not austriaeast,
    # the closest spelling of us-east-1).
    ("azure-region-of-aws", "azure", {"region": "us-east-1"}, "region", "'us-east-1'",
     ["'us-east-1' is a region of AWS; Azure's region in the same place is 'eastus'",
      "closest first: eastus,", "`pulumi config set --stack azure region eastus`"]),
    ("gcp-region-of-azure", "gcp", {"region": "westus2"}, "region", "'westus2'",
     ["Azure; GCP's region in the same place is 'us-west1'",
      "`pulumi config set --stack gcp region us-west1`"]),
    # Azure's display name, as the portal shows it, is its API name in lower case without spaces.
    ("azure-region-display-name", "azure", {"region": "East US"}, "region", "'East US'",
     ["did you mean 'eastus'?", "pulumi config set --stack azure region eastus"]),
    ("enum-misspelt", "aws", {"job": {"pool": "spto"}}, "job.pool", "'spto'",
     ["did you mean 'spot'?", "'onDemand' or 'spot'", "pulumi config set --stack aws --path job.pool spot"]),
    # Case does not count: SPOT meant spot, not the first choice (onDemand costs 2.5x).
    ("enum-upper-case", "aws", {"job": {"pool": "SPOT"}}, "job.pool", "'SPOT'",
     ["did you mean 'spot'?", "pulumi config set --stack aws --path job.pool spot"]),
    # A region moved alone: each zone is named with the command that lists the region's zones
    # (which letters exist is the project's or account's to say).
    ("zones-left-in-the-old-region", "gcp", {"region": "europe-west4"}, "zones",
     "'us-central1-a'", ["must be a zone of region 'europe-west4'",
                         "`gcloud compute zones list --filter=region:europe-west4`",
                         "`pulumi config set --stack gcp --path 'zones[0]' <zone>`"]),
    # `pulumi config set --path kubernetes.apiAccessCidrs 81.2.69.142/32` stores text.
    ("cidrs-as-text", "aws", {"kubernetes": {"apiAccessCidrs": "81.2.69.142/32"}},
     "kubernetes.apiAccessCidrs", "'81.2.69.142/32'",
     ["a list allowed, text given", "pulumi config rm --stack aws --path kubernetes.apiAccessCidrs",
      "pulumi config set --stack aws --path 'kubernetes.apiAccessCidrs[0]' 81.2.69.142/32"]),
    ("nodes-as-text", "gcp", {"job": {"nodes": "two"}}, "job.nodes", "'two'",
     ["an integer allowed, text given", "pulumi config set --stack gcp --path job.nodes <integer>"]),
    ("suspend-as-text", "azure", {"job": {"suspend": "maybe"}}, "job.suspend", "'maybe'",
     ["true or false allowed, text given", "pulumi config set --stack azure --path job.suspend true"]),
    # Tables no node count holds: the table flag is blamed, not job.nodes.
    ("tables-too-big", "gcp", {"job": {"trainerArgs": {"num_embeddings": 100000000000}}},
     "job.trainerArgs.num_embeddings", "100000000000",
     ["tables the GPUs can hold", " GB of tables", "no job.nodes up to 64 fits"]),
    # A refused table flag is named, not computed with (it once raised a traceback).
    ("embedding-dim-12B", "aws", {"job": {"trainerArgs": {"embedding_dim": "12B"}}},
     "job.trainerArgs.embedding_dim", "'12B'", ["an integer", "refuses it"]),
    ("num-embeddings-text", "aws", {"job": {"pool": "spot", "trainerArgs": {"num_embeddings": "many"}}},
     "job.trainerArgs.num_embeddings", "'many'", ["an integer", "refuses it"]),
    ("data-parallel-max-mb-text", "gcp",
     {"job": {"pool": "spot", "trainerArgs": {"data_parallel_max_mb": "lots"}}},
     "job.trainerArgs.data_parallel_max_mb", "'lots'", ["a number", "refuses it"]),
    ("trainer-flag-with-dashes", "aws", {"job": {"trainerArgs": {"max-steps": 100}}},
     "job.trainerArgs.max-steps", "100", ["did you mean 'max_steps'?"]),
    # The value as the stack file spells it (YAML), not as Python prints it.
    ("pool-sizes-as-yaml", "aws", {"gpuPools": {"spot": {"minNodes": 3}}},
     "gpuPools.spot.desiredNodes", "{minNodes: 3, desiredNodes: 0, maxNodes: 2}",
     ["0 <= minNodes <= desiredNodes <= maxNodes"]),
    ("gcp-placeholder-project", "gcp", {"gcp": {"project": "my-gcp-project"}}, "gcp.project",
     "'my-gcp-project'", ["placeholder", "gcloud config get-value project",
                          "pulumi config set --stack gcp --path gcp.project <project-id>"]),
    ("misspelt-key", "aws", {"gpuPools": {"spot": {"maxNode": 4}}},
     "gpuPools.spot.maxNode", "4",
     ["did you mean 'maxNodes'?", "remove it with `pulumi config rm --stack aws --path "
      "gpuPools.spot.maxNode` and set it with `pulumi config set --stack aws --path "
      "gpuPools.spot.maxNodes 4`"]),
    ("misspelt-trainer-flag", "aws", {"job": {"trainerArgs": {"max_step": 100}}},
     "job.trainerArgs.max_step", "100",
     ["did you mean 'max_steps'?", "`pulumi config rm --stack aws --path job.trainerArgs.max_step`",
      "`pulumi config set --stack aws --path job.trainerArgs.max_steps 100`"]),
    # An unset default says what leaving the flag out means, not "None".
    ("trainer-flag-unset-default", "aws", {"job": {"trainerArgs": {"max_steps": "all"}}},
     "job.trainerArgs.max_steps", "'all'",
     ["unset by default, when the trainer uses: --num_epochs",
      "`pulumi config set --stack aws --path job.trainerArgs.max_steps <integer>`"]),
    ("api-open-to-the-world", "gcp", {"kubernetes": {"apiAccessCidrs": ["0.0.0.0/0"]}},
     "kubernetes.apiAccessCidrs", "['0.0.0.0/0']",
     ["whole internet; name your own public address",
      "--path 'kubernetes.apiAccessCidrs[0]' \"$(curl -s https://checkip.amazonaws.com)/32\""]),
    # the second item's fix sets the second item
    ("api-cidr-host-bits", "aws",
     {"kubernetes": {"apiAccessCidrs": ["81.2.69.142/32", "81.2.69.143/24"]}},
     "kubernetes.apiAccessCidrs", "['81.2.69.142/32', '81.2.69.143/24']",
     ["for the address alone: `pulumi config set --stack aws --path "
      "'kubernetes.apiAccessCidrs[1]' 81.2.69.143/32`"]),
    ("machine-misspelt", "aws", {"gpuPools": {"onDemand": {"machineType": "p4d.24xlarg"}}},
     "gpuPools.onDemand.machineType", "'p4d.24xlarg'",
     ["did you mean 'p4d.24xlarge'? set it with `pulumi config set --stack aws --path "
      "gpuPools.onDemand.machineType p4d.24xlarge`"]),
    # 500 GPU nodes (about USD 11,000/h) under a ceiling of USD 100/h; spot at up to on-demand
    ("over-the-spend-ceiling", "aws",
     {"job": {"nodes": 500, "maxHourlyUsd": 100}, "gpuPools": {"onDemand": {"maxNodes": 500}}},
     # the spot pool, which this on-demand job never uses, is not counted (job_most_hourly)
     "job.maxHourlyUsd", "100.0", ["the stack may cost up to USD 10,", "an hour with every pool at its maxNodes",
                                   "500 x p4d.24xlarge on-demand", "pulumi config set --stack aws --path job.maxHourlyUsd"]),
    # The trainerArgs every stack file shipped before this check: each pod exited at once.
    ("trainer-combination", "azure",
     {"job": {"trainerArgs": {"batch_size": 2048, "embedding_dim": 128}}},
     "job.trainerArgs.dense_arch_layer_sizes", "(not set)",
     ["the trainer's default is '512,256,64'", "the last size must equal --embedding_dim (128)",
      "set job.trainerArgs.dense_arch_layer_sizes"]),
]


@pytest.mark.parametrize(("stack", "overrides", "setting", "value", "says"),
                         [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_each_mistake_is_refused_naming_setting_value_allowed_and_fix(
        tmp_path: Path, stack: str, overrides: dict[str, Any], setting: str, value: str,
        says: list[str]) -> None:
    result = check("--file", str(write_stack(tmp_path, stack, overrides)))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "(nothing was created)" in result.stderr
    assert "Traceback" not in result.stderr
    line = next((line for line in result.stderr.splitlines()
                 if line.strip().startswith(f"{PROJECT}:{setting} = ")), None)
    assert line is not None, result.stderr
    assert line.strip().startswith(f"{PROJECT}:{setting} = {value}: "), line
    for text in says:
        assert text in line, f"{text!r} not in {line}"


def test_a_bad_region_is_not_blamed_on_the_zones(tmp_path: Path) -> None:
    result = check("--file", str(write_stack(tmp_path, "aws", {"region": "us-east-9"})))
    assert result.stderr.count(f"{PROJECT}:") == 1, result.stderr
    assert "us-east-9a" not in result.stderr


@pytest.mark.parametrize("stack", STACKS)
def test_the_shipped_stack_files_as_configured_pass_and_show_the_machines(
        tmp_path: Path, stack: str) -> None:
    path = write_stack(tmp_path, stack)
    result = check("--file", str(path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "every setting is valid" in out
    assert "8 x A100 40 GB" in out  # the catalog's figures for the GPU machine
    assert "(on-demand)" in out and "(spot)" in out
    assert "nodes min 0 / desired 0 / max 2" in out
    assert "2 nodes x 8 processes = 16 ranks" in out
    assert "--batch_size=2048" in out
    assert "not checked without credentials:" in out
    # the estimate before paying: hourly items and one run's hours and dollars, with a source,
    # exactly as infra/estimate.py computes it for the same file (what `pulumi up` exports)
    assert "Cost per hour" in out and "control plane" in out and "One run of job dlrm:" in out
    printed = out.splitlines()
    expected = estimate_lines_for(path)
    start = printed.index(expected[0])
    assert printed[start:start + len(expected)] == expected


def estimate_lines_for(path: Path) -> list[str]:
    from infra.estimate import estimate_lines
    from infra.settings.loader import settings_from_mapping
    from infra.settings.loader import project_values
    from torchrec_cloud.stack_file import read_stack_file

    return estimate_lines(settings_from_mapping(project_values(read_stack_file(path, PROJECT).config)))


@pytest.mark.parametrize("stack", STACKS)
def test_the_shipped_stack_files_alone_say_what_the_user_must_set(stack: str) -> None:
    """`make check STACK=<stack>` before the configure step: the values only the user knows."""
    result = check("--stack", stack)
    assert result.returncode == 1
    assert "kubernetes.apiAccessCidrs = (not set): required" in result.stderr
    # the stack named: with another stack selected, the command edits this one's file
    assert (f"pulumi config set --stack {stack} --path 'kubernetes.apiAccessCidrs[0]'"
            in result.stderr)
    assert ("gcp.project = (not set): required" in result.stderr) == (stack == "gcp")


def test_values_are_read_as_the_pulumi_cli_passes_them(tmp_path: Path) -> None:
    """A top-level scalar reaches the program as its text (Pulumi's config.Value), which the
    loader reads as JSON where it parses: `"3"` is the number 3 for `pulumi up`, so for check."""
    path = write_stack(tmp_path, "aws")
    text = path.read_text().replace(f"{PROJECT}:region: us-east-1",
                                    f"{PROJECT}:region: us-east-1\n  systemPool:\n"
                                    f"    minNodes: '1'")
    path.write_text(text)
    from infra.settings.loader import project_values
    from torchrec_cloud.stack_file import read_stack_file

    stack = read_stack_file(path, PROJECT)
    assert stack.config[f"{PROJECT}:region"] == "us-east-1"  # a bare key: the project's
    assert stack.config[f"{PROJECT}:systemPool"] == '{"minNodes": "1"}'
    assert project_values(stack.config)["job"]["nodes"] == 2
    assert check("--file", str(path)).returncode == 0


def test_an_unreadable_stack_file_is_named(tmp_path: Path) -> None:
    result = check("--file", str(tmp_path / "Pulumi.nowhere.yaml"))
    assert result.returncode == 1
    assert "Pulumi.nowhere.yaml: cannot be read" in result.stderr


def _lines(result: subprocess.CompletedProcess[str], setting: str) -> list[str]:
    return [line.strip() for line in result.stderr.splitlines()
            if line.strip().startswith(f"{PROJECT}:{setting} = ")]


def test_every_bad_value_of_one_setting_is_named_in_one_run(tmp_path: Path) -> None:
    """A region moved without its zones: both zones are named, each with its own command."""
    path = write_stack(tmp_path, "aws", {"region": "us-west-2"})
    result = check("--file", str(path))
    assert result.returncode == 1
    zones = _lines(result, "zones")
    assert [line.split(":")[1] for line in zones] == ["zones = 'us-east-1a'",
                                                       "zones = 'us-east-1b'"]
    assert "pulumi config set --stack aws --path 'zones[0]' <zone>" in zones[0]
    assert "pulumi config set --stack aws --path 'zones[1]' <zone>" in zones[1]
    (gpu,) = _lines(result, "gpuZones")
    assert "pulumi config set --stack aws --path 'gpuZones[0]' <zone>" in gpu
    for line in (*zones, gpu):
        assert "`aws ec2 describe-availability-zones --region us-west-2`" in line


def test_a_choice_nothing_is_close_to_gets_no_command(tmp_path: Path) -> None:
    """A guess would set the first choice, onDemand, whatever was meant."""
    result = check("--file", str(write_stack(tmp_path, "aws", {"job": {"pool": "preemptible"}})))
    (line,) = _lines(result, "job.pool")
    assert line.endswith("= 'preemptible': Input should be 'onDemand' or 'spot'"), line


def test_a_key_set_without_path_is_named_with_the_command_that_has_it(tmp_path: Path) -> None:
    """`pulumi config set 'kubernetes.apiAccessCidrs[0]' ...` without --path writes one flat key."""
    path = write_stack(tmp_path, "aws")
    config = yaml.safe_load(path.read_text())["config"]
    del config[f"{PROJECT}:kubernetes"]
    config[f"{PROJECT}:kubernetes.apiAccessCidrs[0]"] = "81.2.69.142/32"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    result = check("--file", str(path))
    assert result.returncode == 1
    (line,) = _lines(result, "kubernetes.apiAccessCidrs[0]")
    assert "'81.2.69.142/32': looks like `pulumi config set` without `--path`" in line
    assert "pulumi config rm --stack aws 'kubernetes.apiAccessCidrs[0]'" in line
    assert "pulumi config set --stack aws --path 'kubernetes.apiAccessCidrs[0]' 81.2.69.142/32" in line
    assert "the settings here:" not in line


def test_a_list_set_without_path_is_fixed_with_an_indexed_path(tmp_path: Path) -> None:
    """`pulumi config set kubernetes.apiAccessCidrs 81.2.69.142/32` (no --path, no index): the
    fix names `[0]`, since `--path kubernetes.apiAccessCidrs x` would store text again."""
    path = write_stack(tmp_path, "aws")
    config = yaml.safe_load(path.read_text())["config"]
    del config[f"{PROJECT}:kubernetes"]
    config[f"{PROJECT}:kubernetes.apiAccessCidrs"] = "81.2.69.142/32"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    result = check("--file", str(path))
    assert result.returncode == 1
    (line,) = [line for line in _lines(result, "kubernetes.apiAccessCidrs") if "without" in line]
    assert "pulumi config rm --stack aws kubernetes.apiAccessCidrs" in line
    assert ("set it with `pulumi config set --stack aws --path 'kubernetes.apiAccessCidrs[0]' "
            "81.2.69.142/32`") in line


def test_a_misspelt_config_key_is_named_not_every_setting_as_missing(tmp_path: Path) -> None:
    """`conifg:` once gave only "cloud = (not set): required"."""
    path = tmp_path / "Pulumi.aws.yaml"
    path.write_text(yaml.safe_dump({"conifg": configured("aws")}, sort_keys=False))
    result = check("--file", str(path))
    assert result.returncode == 1
    assert ("no `config:` map, so no setting can be read; unknown top-level key 'conifg' "
            "(did you mean 'config'?)") in result.stderr
    assert "(not set): required" not in result.stderr


def test_an_unknown_key_beside_config_is_named(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.aws.yaml"
    path.write_text(yaml.safe_dump({"config": configured("aws"), "enviroment": ["team/aws"]},
                                   sort_keys=False))
    result = check("--file", str(path))
    assert result.returncode == 1
    assert "unknown top-level key 'enviroment' (did you mean 'environment'?)" in result.stderr


def test_a_file_of_no_stack_s_name_gets_commands_without_stack(tmp_path: Path) -> None:
    """The stack is named where it is known (--stack, `Pulumi.<stack>.yaml`), never guessed."""
    named = write_stack(tmp_path, "aws", {"job": {"pool": "spto"}})
    other = named.rename(tmp_path / "candidate.yaml")
    (line,) = _lines(check("--file", str(other)), "job.pool")
    assert "`pulumi config set --path job.pool spot`" in line


def test_a_bad_range_and_a_bad_choice_are_both_named(tmp_path: Path) -> None:
    path = write_stack(tmp_path, "aws", {"job": {"trainerArgs": {
        "batch_size": 2048, "embedding_dim": 128, "dense_arch_layer_sizes": [512, 256, 128],
        "max_steps": -5, "interaction": "dcnv2"}}})
    result = check("--file", str(path))
    assert result.returncode == 1
    (steps,) = _lines(result, "job.trainerArgs.max_steps")
    (interaction,) = _lines(result, "job.trainerArgs.interaction")
    assert steps.startswith(f"{PROJECT}:job.trainerArgs.max_steps = -5: ")
    assert "did you mean 'dcn'?" in interaction


def test_a_list_value_is_printed_as_yaml(tmp_path: Path) -> None:
    result = check("--file", str(write_stack(
        tmp_path, "aws", {"kubernetes": {"apiAccessCidrs": ["0.0.0.0/0"]}})))
    (line,) = _lines(result, "kubernetes.apiAccessCidrs")
    assert line.startswith(f"{PROJECT}:kubernetes.apiAccessCidrs = ['0.0.0.0/0']: "), line


SECURE = {"secure": "v1:Zm9vYmFy:c2VjcmV0"}  # as `pulumi config set --secret` writes one


def test_an_encrypted_api_cidr_is_not_a_missing_one(tmp_path: Path) -> None:
    """`pulumi config set --secret --path 'kubernetes.apiAccessCidrs[0]' ...`: `pulumi up` gets
    the list decrypted in place (config/value.go, decryptObject), so the check must not say
    "required"; it says the leaf is not checked and passes on everything else."""
    path = write_stack(tmp_path, "aws", {"kubernetes": {"apiAccessCidrs": [SECURE]}})
    result = check("--file", str(path))
    assert result.returncode == 0, result.stderr
    assert "required" not in result.stdout + result.stderr
    assert (f"{PROJECT}:kubernetes.apiAccessCidrs[0]: encrypted: not checked"
            in result.stdout)


def test_a_secret_inside_job_leaves_the_rest_of_job_checked(tmp_path: Path) -> None:
    """3 nodes x 8 ranks with recipe mlperf (24 ranks do not divide 65536) is refused by
    `pulumi up`; a secret beside them (job.serviceAccount) must not hide it."""
    path = write_stack(tmp_path, "aws", {"job": {
        "nodes": 3, "serviceAccount": SECURE, "trainerArgs": {"recipe": "mlperf"}}},
    )
    result = check("--file", str(path))
    assert result.returncode == 1
    assert any("recipe mlperf splits 65536 samples" in line and "(24)" in line
               for line in _lines(result, "job.nodes")), result.stderr
    assert f"{PROJECT}:job.serviceAccount: encrypted: not checked" in result.stderr
    assert not _lines(result, "job.serviceAccount")


def test_a_bad_stand_in_is_never_blamed_only_the_encrypted_place_is_spared(
        tmp_path: Path) -> None:
    """An encrypted zone (whose stand-in cannot be known) is not judged; the readable bad
    value beside it still is."""
    path = write_stack(tmp_path, "aws", {"zones": ["us-east-1a", SECURE],
                                         "systemPool": {"minNodes": 5, "desiredNodes": 1}})
    result = check("--file", str(path))
    assert result.returncode == 1
    assert not _lines(result, "zones") and not _lines(result, "zones[1]")
    assert _lines(result, "systemPool.desiredNodes")
    assert f"{PROJECT}:zones[1]: encrypted: not checked" in result.stderr


def test_a_whole_encrypted_key_is_spared_and_named(tmp_path: Path) -> None:
    path = write_stack(tmp_path, "gcp")
    config = yaml.safe_load(path.read_text())["config"]
    config[f"{PROJECT}:gcp"] = SECURE  # `pulumi config set --secret gcp '{"project": ...}'`
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    result = check("--file", str(path))
    assert result.returncode == 0, result.stderr
    assert f"{PROJECT}:gcp: encrypted: not checked" in result.stdout


def test_esc_environments_are_named_when_a_value_is_missing(tmp_path: Path) -> None:
    """A CIDR or gcp.project that a Pulumi ESC environment supplies is not read here: the
    'required' may be a false alarm, and the output says which environments to look in."""
    config = shipped_stack_config("gcp")
    path = tmp_path / "Pulumi.gcp.yaml"
    path.write_text(yaml.safe_dump({"environment": ["team/gpu-net", "team/gcp"],
                                    "config": config}, sort_keys=False))
    result = check("--file", str(path))
    assert result.returncode == 1
    assert "gcp.project = (not set): required" in result.stderr
    for name in ("team/gpu-net", "team/gcp"):
        assert (f"values from ESC environment {name} are not read: a 'required' for one of "
                "its keys may be a false alarm") in result.stderr


def test_the_stack_file_keeps_each_secret_where_the_cli_decrypts_it(tmp_path: Path) -> None:
    from torchrec_cloud.encrypted import encrypted_places
    from torchrec_cloud.stack_file import read_stack_file

    path = write_stack(tmp_path, "aws", {"kubernetes": {"apiAccessCidrs": ["81.2.69.142/32",
                                                                           SECURE]},
                                         "job": {"trainerArgs": {"seed": SECURE}}})
    stack = read_stack_file(path, PROJECT)
    assert sorted(encrypted_places(stack.secrets), key=str) == [
        ("job", "trainerArgs", "seed"), ("kubernetes", "apiAccessCidrs", 1)]
    assert '"81.2.69.142/32"' in stack.config[f"{PROJECT}:kubernetes"]  # the rest is read


def test_a_rule_that_names_an_encrypted_value_is_a_possible_false_alarm(tmp_path: Path) -> None:
    """An encrypted gpuPools.onDemand.maxNodes takes its default (2) for the check: job.nodes 4
    is judged against a stand-in, so it is shown as a possible false alarm, not refused."""
    path = write_stack(tmp_path, "aws", {"job": {"nodes": 4},
                                         "gpuPools": {"onDemand": {"maxNodes": SECURE}}})
    result = check("--file", str(path))
    assert result.returncode == 0, result.stderr
    (line,) = _lines(result, "job.nodes")
    assert "at most gpuPools.onDemand.maxNodes (2): lower it with `pulumi config set --stack aws " \
           "--path job.nodes 2`" in line, line
    assert line.endswith("; may be a false alarm (an encrypted value was stood in for)"), line
    assert "nothing was created" not in result.stderr
    # beside a certainly bad value, the check fails on that one and still marks the other
    path = write_stack(tmp_path, "aws", {"job": {"nodes": 4, "processesPerNode": 9},
                                         "gpuPools": {"onDemand": {"maxNodes": SECURE}}})
    result = check("--file", str(path))
    assert result.returncode == 1
    assert "2 bad settings" in result.stderr
    assert "may be a false alarm" not in _lines(result, "job.processesPerNode")[0]
    assert _lines(result, "job.nodes")[0].endswith("may be a false alarm (an encrypted value "
                                                   "was stood in for)")


def test_a_possible_false_alarm_shows_the_encrypted_value_as_encrypted(tmp_path: Path) -> None:
    path = write_stack(tmp_path, "aws", {"gpuPools": {"onDemand": {"minNodes": 1,
                                                                   "maxNodes": SECURE}}})
    result = check("--file", str(path))
    assert result.returncode == 0, result.stderr
    (line,) = _lines(result, "gpuPools.onDemand.desiredNodes")
    assert "= {minNodes: 1, desiredNodes: 0, maxNodes: (encrypted)}: " in line, line


def test_an_encrypted_zone_stands_in_as_a_zone_of_the_stack_s_region(tmp_path: Path) -> None:
    """Once stood in for by us-east-1a, the AWS default, refused in eu-west-1 and shown as if
    the user had written it."""
    path = write_stack(tmp_path, "aws", {"region": "eu-west-1", "zones": [SECURE, "eu-west-1b"],
                                         "gpuZones": ["eu-west-1a"]})
    result = check("--file", str(path))
    assert result.returncode == 0, result.stderr
    assert "us-east-1a" not in result.stdout + result.stderr and not _lines(result, "zones")
    assert "zones eu-west-1a, eu-west-1b (GPU: eu-west-1a)" in result.stdout
    assert f"{PROJECT}:zones[0]: encrypted: not checked" in result.stdout


def test_an_encrypted_zone_s_stand_in_is_never_shown_as_the_user_s(tmp_path: Path) -> None:
    """Both zones encrypted: whatever stands in is not blamed; the readable zone beside it in
    another region still is."""
    path = write_stack(tmp_path, "gcp", {"region": "europe-west4", "zones": [SECURE],
                                         "gpuZones": ["us-central1-a"]})
    result = check("--file", str(path))
    assert result.returncode == 1
    assert not _lines(result, "zones")
    (gpu, *_) = _lines(result, "gpuZones")
    assert gpu.startswith(f"{PROJECT}:gpuZones = 'us-central1-a': must be a zone of region 'europe-west4'")


def test_an_encrypted_region_does_not_put_the_zones_in_the_default_one(tmp_path: Path) -> None:
    """An encrypted region once stood in as us-east-1 and every eu-west-1 zone was refused with
    commands to rewrite it; the zones' own region stands in, and no zone is judged against a
    region the check cannot read."""
    path = write_stack(tmp_path, "aws", {"region": SECURE, "zones": ["eu-west-1a", "eu-west-1b"],
                                         "gpuZones": ["eu-west-1a"]})
    result = check("--file", str(path))
    assert result.returncode == 0, result.stderr
    assert "cloud        aws, region eu-west-1, zones eu-west-1a, eu-west-1b" in result.stdout
    assert f"{PROJECT}:region: encrypted: not checked" in result.stdout
    # zones in two regions: no region can stand in, and the zones are not judged against one
    path = write_stack(tmp_path, "aws", {"region": SECURE, "zones": ["eu-west-1a", "us-west-2b"],
                                         "gpuZones": ["eu-west-1a"],
                                         "systemPool": {"minNodes": 5, "desiredNodes": 1}})
    result = check("--file", str(path))
    assert result.returncode == 1
    assert not _lines(result, "zones") and not _lines(result, "gpuZones")
    assert _lines(result, "systemPool.desiredNodes")


DOCS_DATA_FORMS = {  # docs/data.md's `pulumi config set --path` forms: text, an int, lists
    "text": {"dense_arch_layer_sizes": "512,256,128", "embedding_dim": 128,
             "over_arch_layer_sizes": "1024,1024,512,256,1",
             "num_embeddings_per_feature": ",".join(["1000"] * 26),
             "multi_hot_sizes": ",".join(["2"] * 26)},
    "int": {"over_arch_layer_sizes": 1},
    "lists": {"dense_arch_layer_sizes": [512, 256, 128], "embedding_dim": 128,
              "over_arch_layer_sizes": [1024, 1024, 512, 256, 1],
              "num_embeddings_per_feature": [1000] * 26, "multi_hot_sizes": [2] * 26},
}


@pytest.mark.parametrize("form", list(DOCS_DATA_FORMS))
def test_trainer_args_in_the_docs_forms_pass_and_are_estimated(tmp_path: Path, form: str) -> None:
    """A comma separated text, a single int or a list for a list flag: the trainer reads each,
    so `check` passes and prints the run's estimate (a ValueError crashed it)."""
    args = {"batch_size": 2048, **DOCS_DATA_FORMS[form]}
    done = check("--file", str(write_stack(tmp_path, "aws", {"job": {"trainerArgs": args}})))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "One run of job" in done.stdout and "about USD" in done.stdout


def test_azure_zones_and_tags_written_as_numbers_are_read_as_text(tmp_path: Path) -> None:
    """`pulumi config set --path 'zones[0]' 1` stores the integer 1; it is the zone "1"."""
    path = write_stack(tmp_path, "azure", {"tags": {"costCenter": 2026}})
    config = yaml.safe_load(path.read_text())["config"]
    config[f"{PROJECT}:zones"] = [1, 2]
    config[f"{PROJECT}:gpuZones"] = [1]
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    result = check("--file", str(path))
    assert result.returncode == 0, result.stderr
    assert "zones 1, 2 (GPU: 1)" in result.stdout


def test_a_flat_key_is_not_also_reported_as_a_missing_setting(tmp_path: Path) -> None:
    """The flat key's line says how to set the value; "required (not set)" would repeat it."""
    path = write_stack(tmp_path, "aws")
    config = yaml.safe_load(path.read_text())["config"]
    del config[f"{PROJECT}:kubernetes"]["apiAccessCidrs"]
    config[f"{PROJECT}:kubernetes.apiAccessCidrs[0]"] = "81.2.69.142/32"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    result = check("--file", str(path))
    assert result.returncode == 1
    assert "(not set)" not in result.stderr, result.stderr
    assert "1 bad setting in the stack file" in result.stderr


def test_a_refusal_ends_with_one_line_that_says_nothing_was_created(tmp_path: Path) -> None:
    """Under `make check` that line sits just above make's "Error 1", which CI relies on."""
    result = check("--file", str(write_stack(tmp_path, "aws", {"region": "us-east-9"})))
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "check: 1 problem in Pulumi.aws.yaml; nothing was created (exit status 1)")


def test_check_as_a_process_exits_and_prints_exactly_what_the_in_process_runs_assert(
        tmp_path: Path) -> None:
    """The console entry (`python -m torchrec_cloud check`) as a real process, on a file that
    passes and on one refused: the same exit status, stdout and stderr, byte for byte, as the
    in-process `check` the other tests of this file read."""
    passing = write_stack(tmp_path, "aws")
    (tmp_path / "refused").mkdir()
    refused = write_stack(tmp_path / "refused", "gcp", {"region": "us-east-9"})
    for path, status in ((passing, 0), (refused, 1)):
        process, here = check_process("--file", str(path)), check("--file", str(path))
        assert process.returncode == here.returncode == status, process.stderr
        assert (process.stdout, process.stderr) == (here.stdout, here.stderr)
        assert "Traceback" not in process.stderr


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    """`python -m torchrec_cloud check --stack aws | head -1`: the pipe closes after a line."""
    path = write_stack(tmp_path, "aws")
    process = subprocess.Popen([sys.executable, "-m", "torchrec_cloud", "check", "--file",
                                str(path)], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, bufsize=0)
    assert process.stdout is not None and process.stderr is not None
    # `head -1` closes once it has its line; closed at once, no write can ever find a reader
    # (a race-free stand-in: the command's imports take far longer than this line)
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 141, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr


# Accepted before issue 33, and each hurts (id, stack, overrides, setting, value, says).
HURTFUL = [
    ("api-half-the-internet-twice", "aws",
     {"kubernetes": {"apiAccessCidrs": ["0.0.0.0/1", "128.0.0.0/1"]}},
     "kubernetes.apiAccessCidrs[1]", "'128.0.0.0/1'",
     ["a /1 admits 2,147,483,648 addresses", "at most a /16",
      "pulumi config set --stack aws --path kubernetes.allowBroadApiAccess true"]),
    ("api-slash-5", "gcp", {"kubernetes": {"apiAccessCidrs": ["8.0.0.0/5"]}},
     "kubernetes.apiAccessCidrs[0]", "'8.0.0.0/5'",
     ["at most a /16", "'kubernetes.apiAccessCidrs[0]'"]),
    ("namespace-kube-system", "aws", {"job": {"namespace": "kube-system"}}, "job.namespace",
     "'kube-system'", ["a namespace of the job's own",
                       "pulumi config set --stack aws --path job.namespace torchrec"]),
    ("namespace-default", "azure", {"job": {"namespace": "default"}}, "job.namespace",
     "'default'", ["a namespace of the job's own"]),
    ("namespace-kube-public", "gcp", {"job": {"namespace": "kube-public"}}, "job.namespace",
     "'kube-public'", ["a namespace of the job's own"]),
    ("namespace-kube-node-lease", "aws", {"job": {"namespace": "kube-node-lease"}},
     "job.namespace", "'kube-node-lease'", ["a namespace of the job's own"]),
    ("namespace-kueue-system", "gcp", {"job": {"namespace": "kueue-system"}}, "job.namespace",
     "'kueue-system'", ["a namespace of the job's own", "hold the stack's add-ons"]),
    ("namespace-kube-prefix", "aws", {"job": {"namespace": "kube-flannel"}}, "job.namespace",
     "'kube-flannel'", ["or kube-*"]),
    ("service-account-default", "aws", {"job": {"serviceAccount": "default"}},
     "job.serviceAccount", "'default'",
     ["every pod in the namespace runs as 'default'",
      "pulumi config set --stack aws --path job.serviceAccount trainer"]),
    ("mount-tmp", "aws", {"sharedFileSystem": {"mountPath": "/tmp"}}, "sharedFileSystem.mountPath",
     "'/tmp'", ["not /tmp", "sharedFileSystem.mountPath /mnt/shared"]),
    ("mount-dev-shm", "gcp", {"sharedFileSystem": {"mountPath": "/dev/shm"}},
     "sharedFileSystem.mountPath", "'/dev/shm'", ["not /dev/shm"]),
    ("mount-proc-below", "azure", {"sharedFileSystem": {"mountPath": "/proc/data"}},
     "sharedFileSystem.mountPath", "'/proc/data'", ["not /proc"]),
    ("mount-dot-dot", "aws", {"sharedFileSystem": {"mountPath": "/mnt/../etc"}},
     "sharedFileSystem.mountPath", "'/mnt/../etc'", ["without '..' or '//'"]),
    ("mount-double-slash", "aws", {"sharedFileSystem": {"mountPath": "//tmp"}},
     "sharedFileSystem.mountPath", "'//tmp'", ["without '..' or '//'"]),
    ("mount-image-app", "gcp", {"sharedFileSystem": {"mountPath": "/app"}},
     "sharedFileSystem.mountPath", "'/app'", ["not /app"]),
    ("mount-image-home", "aws", {"sharedFileSystem": {"mountPath": "/home/trainer/data"}},
     "sharedFileSystem.mountPath", "'/home/trainer/data'", ["(in /home)"]),
    ("aws-tag-key-too-long", "aws", {"tags": {"k" * 129: "v"}}, f"tags.{'k' * 129}", "'v'",
     ["a key of 1-128 characters", "pulumi config rm --stack aws --path"]),
    ("aws-tag-key-aws-prefix", "aws", {"tags": {"aws:owner": "me"}}, "tags.aws:owner", "'me'",
     ["AWS reserves tag keys starting with 'aws:'"]),
    ("aws-tag-value-too-long", "aws", {"tags": {"team": "v" * 257}}, "tags.team", f"'{'v' * 257}'",
     ["a value of at most 256"]),
    ("gcp-label-upper-case", "gcp", {"tags": {"Team": "recs"}}, "tags.Team", "'recs'",
     ["GCP labels: a key of 1-63 lowercase letters"]),
    ("gcp-label-value-space", "gcp", {"tags": {"team": "rec sys"}}, "tags.team", "'rec sys'",
     ["GCP labels"]),
    ("azure-tag-slash", "azure", {"tags": {"cost/center": "1"}}, "tags.cost/center", "'1'",
     ["Azure tag names may not hold"]),
    ("azure-tag-reserved", "azure", {"tags": {"microsoftOwner": "me"}}, "tags.microsoftOwner",
     "'me'", ["Azure reserves tag names starting with microsoft"]),
    ("keep-1e12", "aws", {"checkpoints": {"keep": 1e12}}, "checkpoints.keep", "1000000000000",
     ["1 to 1000 newest checkpoints", "pulumi config set --stack aws --path checkpoints.keep 3"]),
    ("dataset-path-dot", "aws", {"dataset": {"path": "."}}, "dataset.path", "'.'",
     ["a folder under the mount, not the mount itself"]),
    # 44 of the stack file's own + the shipped `project` tag: 45, past 50 less the 6 the stack
    # and EKS put on a GPU instance themselves.
    ("aws-tags-past-fifty-with-the-stack-s-own", "aws",
     {"tags": {f"team{n}": "recs" for n in range(44)}}, "tags", "'45 tags'",
     ["at most 44", "AWS takes 50 tags per resource", "up to 6 of their own",
      "pulumi config rm --stack aws --path 'tags.<key>'"]),
    ("gcp-labels-that-collide-once-mended", "gcp", {"tags": {"team_a": "recs", "team.a": "ads"}},
     "tags.team_a", "'recs'", ["tags.team.a and tags.team_a are one GCP label", "'team_a'",
                               "pulumi config rm --stack gcp --path tags.team_a"]),
    ("gcp-labels-that-differ-in-case", "gcp", {"tags": {"team": "recs", "Team": "ads"}},
     "tags.team", "'recs'", ["tags.Team and tags.team are one GCP label"]),
    ("image-not-an-image-reference", "aws", {"job": {"image": "ghcr.io/Acme/trainer:v1;id"}},
     "job.image", "'ghcr.io/Acme/trainer:v1;id'",
     ["an image reference as the registry takes it", "[@sha256:<64 hex>]",
      "pulumi config set --stack aws --path job.image ghcr.io/acme/trainer@sha256:<digest>"]),
    ("image-short-digest", "azure", {"job": {"image": "ghcr.io/acme/trainer@sha256:abc123"}},
     "job.image", "'ghcr.io/acme/trainer@sha256:abc123'",
     ["an image reference as the registry takes it"]),
    ("image-with-scheme", "gcp", {"job": {"image": "https://ghcr.io/acme/trainer:1"}},
     "job.image", "'https://ghcr.io/acme/trainer:1'", ["[registry[:port]/]name[:tag]"]),
    # Found by the independent review of issue 33.
    ("namespace-gke-prometheus", "gcp", {"job": {"namespace": "gmp-system"}}, "job.namespace",
     "'gmp-system'", ["not one gcp's managed add-ons create", "gmp-system, gmp-public, gke-*",
                      "pulumi config set --stack gcp --path job.namespace torchrec"]),
    ("namespace-gke-managed", "gcp", {"job": {"namespace": "gke-managed-system"}},
     "job.namespace", "'gke-managed-system'", ["gke-*"]),
    ("namespace-aks-calico", "azure", {"job": {"namespace": "tigera-operator"}}, "job.namespace",
     "'tigera-operator'", ["not one azure's managed add-ons create", "aks-*"]),
    ("namespace-aks-prefix", "azure", {"job": {"namespace": "aks-istio-system"}}, "job.namespace",
     "'aks-istio-system'", ["calico-system, tigera-operator, app-routing-system, aks-*"]),
    ("namespace-eks-amazon", "aws", {"job": {"namespace": "amazon-cloudwatch"}}, "job.namespace",
     "'amazon-cloudwatch'", ["amazon-*, aws-*"]),
    ("namespace-eks-aws", "aws", {"job": {"namespace": "aws-observability"}}, "job.namespace",
     "'aws-observability'", ["not one aws's managed add-ons create"]),
    ("mount-etc-ssl", "aws", {"sharedFileSystem": {"mountPath": "/etc/ssl"}},
     "sharedFileSystem.mountPath", "'/etc/ssl'", ["not /etc/ssl (in /etc)"]),
    ("mount-usr-local", "gcp", {"sharedFileSystem": {"mountPath": "/usr/local"}},
     "sharedFileSystem.mountPath", "'/usr/local'", ["(in /usr)"]),
    ("mount-var", "azure", {"sharedFileSystem": {"mountPath": "/var/data"}},
     "sharedFileSystem.mountPath", "'/var/data'", ["(in /var)"]),
    ("mount-lib64", "aws", {"sharedFileSystem": {"mountPath": "/lib64/x"}},
     "sharedFileSystem.mountPath", "'/lib64/x'", ["(in /lib64)"]),
    ("tag-owner-key", "aws", {"tags": {"torchrec-cloud-stack": "torchrec-cloud/other"}},
     "tags.torchrec-cloud-stack", "'torchrec-cloud/other'",
     ["the stack's own tag", "pulumi config rm --stack aws --path tags.torchrec-cloud-stack"]),
    ("tag-own-prefix", "aws", {"tags": {"torchrec-cloud/pool": "gpu"}}, "tags.torchrec-cloud/pool",
     "'gpu'", ["torchrec-cloud/* are the program's"]),
    ("label-owner-key", "gcp", {"tags": {"torchrec-cloud-stack": "x"}},
     "tags.torchrec-cloud-stack", "'x'", ["the stack's own tag"]),
    ("api-ipv4-mapped-all-of-ipv4", "aws", {"kubernetes": {"apiAccessCidrs": ["::ffff:0.0.0.0/96"]}},
     "kubernetes.apiAccessCidrs[0]", "'::ffff:0:0/96'",
     ["a /0 of IPv4", "admits 4,294,967,296 addresses", "at most a /16"]),
    ("api-ipv4-mapped-slash-8", "gcp", {"kubernetes": {"apiAccessCidrs": ["::ffff:81.0.0.0/104"]}},
     "kubernetes.apiAccessCidrs[0]", "'::ffff:5100:0/104'", ["a /8 of IPv4", "at most a /16"]),
    ("api-41-ranges-on-eks", "aws",
     {"kubernetes": {"apiAccessCidrs": [f"81.2.{n}.0/24" for n in range(41)]}},
     "kubernetes.apiAccessCidrs", "'41 ranges'",
     ["at most 40", "pulumi config rm --stack aws --path 'kubernetes.apiAccessCidrs[<index>]'"]),
    ("api-51-ranges-on-gke", "gcp",
     {"kubernetes": {"apiAccessCidrs": [f"81.2.{n}.0/24" for n in range(51)]}},
     "kubernetes.apiAccessCidrs", "'51 ranges'", ["at most 50"]),
    ("api-201-ranges-on-aks", "azure",
     {"kubernetes": {"apiAccessCidrs": [f"81.{n // 200}.{n % 200}.0/24" for n in range(201)]}},
     "kubernetes.apiAccessCidrs", "'201 ranges'", ["at most 200"]),
    # 33 of the stack file's own + the shipped `project` tag: 34, past 50 less the 17 that AKS
    # and the stack put on a GPU pool's scale set; GCP: 54 + 1, past 64 less 10.
    ("azure-tags-past-fifty-with-the-stack-s-own", "azure",
     {"tags": {f"team{n}": "recs" for n in range(33)}}, "tags", "'34 tags'",
     ["at most 33", "Azure takes 50 tags per resource", "up to 17 of their own",
      "pulumi config rm --stack azure --path 'tags.<key>'"]),
    ("gcp-labels-past-sixty-four-with-the-stack-s-own", "gcp",
     {"tags": {f"team{n}": "recs" for n in range(54)}}, "tags", "'55 tags'",
     ["at most 54", "GCP takes 64 labels per resource", "up to 10 of their own"]),
    ("pool-max-nodes-1e12", "aws", {"gpuPools": {"onDemand": {"maxNodes": 1e12}}},
     "gpuPools.onDemand.maxNodes", "1000000000000",
     ["at most 450 nodes per EKS managed node group",
      "pulumi config set --stack aws --path gpuPools.onDemand.maxNodes 450"]),
    ("pool-max-nodes-aks", "azure", {"gpuPools": {"spot": {"maxNodes": 1001}}},
     "gpuPools.spot.maxNodes", "1001", ["at most 1000 nodes per AKS node pool"]),
    ("pool-max-nodes-gke", "gcp", {"systemPool": {"maxNodes": 1001}}, "systemPool.maxNodes",
     "1001", ["at most 1000 nodes per GKE node pool in a zone"]),
    ("keep-true", "aws", {"checkpoints": {"keep": True}}, "checkpoints.keep", "true",
     ["an integer allowed, true/false given",
      "pulumi config set --stack aws --path checkpoints.keep <integer>"]),
    ("dataset-path-checkpoints", "aws", {"dataset": {"path": "checkpoints"}}, "dataset.path",
     "'checkpoints'", ["apart from the job's own runs/ and checkpoints/"]),
    ("dataset-path-under-runs", "gcp", {"dataset": {"path": "./runs/criteo"}}, "dataset.path",
     "'./runs/criteo'", ["apart from the job's own runs/ and checkpoints/"]),
]


@pytest.mark.parametrize(("stack", "overrides", "setting", "value", "says"),
                         [m[1:] for m in HURTFUL], ids=[m[0] for m in HURTFUL])
def test_each_setting_that_hurts_is_refused_with_its_fix(
        tmp_path: Path, stack: str, overrides: dict[str, Any], setting: str, value: str,
        says: list[str]) -> None:
    test_each_mistake_is_refused_naming_setting_value_allowed_and_fix(
        tmp_path, stack, overrides, setting, value, says)


def test_a_broad_api_range_is_taken_with_the_explicit_opt_in(tmp_path: Path) -> None:
    result = check("--file", str(write_stack(tmp_path, "aws", {"kubernetes": {
        "apiAccessCidrs": ["8.0.0.0/5"], "allowBroadApiAccess": True}})))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("image", ["python:latest", "ghcr.io/acme/trainer",
                                   "ghcr.io/acme/trainer:v1.2"])
def test_an_unpinned_image_is_warned_with_how_to_pin_it_by_digest(tmp_path: Path, image: str) -> None:
    result = check("--file", str(write_stack(tmp_path, "aws", {"job": {"image": image}})))
    assert result.returncode == 0, result.stderr
    assert f"warning: job.image '{image}' is not pinned" in result.stderr
    assert f"docker buildx imagetools inspect {image}" in result.stderr and "@sha256:<digest>" in result.stderr
    pinned = check("--file", str(write_stack(tmp_path, "aws", {"job": {
        "image": "ghcr.io/acme/trainer@sha256:" + "a" * 64}})))
    assert "not pinned" not in pinned.stderr


def test_a_yaml_alias_bomb_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    """Nine anchors, each ten aliases of the one before: 10^9 values once expanded (a "billion
    laughs"). `check` refuses the file from its node graph, naming the aliases, before any
    value is built; unbounded, the expansion would take the machine's memory."""
    lines = ["config:", "  torchrec-cloud:cloud: aws", "  torchrec-cloud:tags:",
             "    a0: &a0 [" + ", ".join(["lol"] * 10) + "]"]
    lines += [f"    a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 10) + "]" for n in range(1, 9)]
    path = tmp_path / "Pulumi.aws.yaml"
    path.write_text("\n".join(lines) + "\n")
    result = check("--file", str(path))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "YAML aliases (*name) expand to more than 100,000 values" in result.stderr
    assert str(path) in result.stderr
    # A few aliases, as people write them, are read as before.
    fine = tmp_path / "fine" / "Pulumi.aws.yaml"
    fine.parent.mkdir()
    fine.write_text(yaml.safe_dump({"config": configured("aws")}, sort_keys=False)
                    .replace("torchrec-cloud:tags:", "torchrec-cloud:tags: &shared", 1)
                    + "  torchrec-cloud:tagsAgain: *shared\n")
    assert "YAML aliases" not in check("--file", str(fine)).stderr


def test_a_python_object_tag_and_a_qualified_stack_name_get_a_message_not_a_traceback(
        tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.aws.yaml"
    path.write_text("config:\n  torchrec-cloud:cloud: !!python/object/apply:os.system ['touch "
                    f"{tmp_path}/pwned']\n")
    result = check("--file", str(path))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert not (tmp_path / "pwned").exists()
    result = check("--stack", "org/torchrec-cloud/aws")
    assert result.returncode != 0 and "Traceback" not in result.stderr and "--stack" in result.stderr


def test_a_fix_command_keeps_a_hostile_tag_key_one_argument(tmp_path: Path) -> None:
    """A tag key with a quote and a `;` is refused; the command the refusal prints, pasted into
    a shell, removes that key and runs nothing else (each value is shell-quoted)."""
    import shlex

    key = "x'; touch pwned; '"
    result = check("--file", str(write_stack(tmp_path, "aws", {"tags": {key: "v"}})))
    assert result.returncode == 1, result.stderr
    line = next(line for line in result.stderr.splitlines() if "pulumi config rm" in line)
    command = line[line.index("`pulumi config rm") + 1:].split("` and", 1)[0]
    assert shlex.split(command) == ["pulumi", "config", "rm", "--stack", "aws", "--path",
                                    f"tags.{key}"]


def test_a_stack_file_nested_too_deep_is_named_at_its_line(tmp_path: Path) -> None:
    """5,000 nested `[`: PyYAML composes by recursion and ends in a RecursionError; `check`
    names the line instead."""
    path = tmp_path / "Pulumi.aws.yaml"
    path.write_text("config:\n  torchrec-cloud:cloud: aws\n  torchrec-cloud:tags: "
                    + "[" * 5000 + "]" * 5000 + "\n")
    result = check("--file", str(path))
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert "RecursionError" not in result.stderr
    assert f"{path}:3: nested too deep at line 3" in result.stderr


def test_a_key_written_twice_is_refused_naming_the_key_and_both_lines(tmp_path: Path) -> None:
    """The Pulumi CLI's YAML reader (yaml.v2, not strict) keeps the last of two equal keys and
    drops the first without a word; `check` names both."""
    text = yaml.safe_dump({"config": configured("aws")}, sort_keys=False)
    text += "  torchrec-cloud:checkpoints:\n    keep: 3\n    everySeconds: 600\n    keep: 30\n"
    path = tmp_path / "Pulumi.aws.yaml"
    path.write_text(text)
    lines = text.splitlines()
    first = lines.index("    keep: 3") + 1
    result = check("--file", str(path))
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert (f"{path}:{first + 2}: the key 'keep' is written twice in one map (lines {first} and "
            f"{first + 2})") in result.stderr


# (stack, zone settings a user got wrong): each is refused with commands that, run as printed
# (the first way the line offers), leave a stack file that check passes.
ZONE_MISTAKES = [
    ("aws", {"zones": ["us-east-1a"]}),  # EKS needs two
    ("aws", {"zones": []}),
    ("aws", {"gpuZones": ["us-east-1a", "us-east-1b"]}),  # placement: one GPU zone
    ("aws", {"gpuZones": ["us-east-1c"]}),  # not among the cluster's zones
    ("aws", {"gpuZones": [], "interconnect": {"placement": False}}),
    ("azure", {"zones": []}),
    ("azure", {"gpuZones": ["3"]}),  # not among the cluster's zones
    ("gcp", {"zones": []}),
    ("gcp", {"zones": ["us-central1-a", "us-central1-b"],
             "gpuZones": ["us-central1-a", "us-central1-b"]}),
]


@pytest.mark.parametrize(("stack", "overrides"), ZONE_MISTAKES,
                         ids=[f"{s}-{'-'.join(f'{k}{len(v)}' if isinstance(v, list) else k for k, v in o.items())}"
                              for s, o in ZONE_MISTAKES])
def test_every_zone_refusal_prints_the_commands_that_fix_it(
        tmp_path: Path, stack: str, overrides: dict[str, Any]) -> None:
    import re

    path = write_stack(tmp_path, stack, {k: v for k, v in overrides.items()})
    config = yaml.safe_load(path.read_text())
    for key, value in overrides.items():  # lists replace, not merge
        config["config"][f"{PROJECT}:{key}"] = value
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    for _ in range(3):  # a fix may uncover the next zone rule; each has its command
        result = check("--file", str(path))
        lines = _lines(result, "zones") + _lines(result, "gpuZones")
        if result.returncode == 0:
            break
        assert lines, result.stderr
        for line in lines:
            commands = re.findall(r"`(pulumi config (?:set|rm) [^`]*)`", line.split(", or ")[0])
            assert commands, f"no command in {line}"
            for command in commands:
                run_config_command(path, command)
    assert result.returncode == 0, result.stderr


# (stack, zones a user copied from another region): the stack's region stays; every zone rule
# that fires in the first round must agree with the others on what the zones become.
CROSS_REGION_ZONES = [
    ("aws", {"zones": ["eu-west-1a"]}),  # also EKS's two zones and the GPU zone among them
    ("aws", {"zones": ["eu-west-1a", "eu-west-1b"]}),
    ("aws", {"gpuZones": ["eu-west-1a"]}),
    ("aws", {"zones": ["eu-west-1a"], "gpuZones": ["eu-west-1b"]}),
    ("aws", {"zones": ["eu-west-1a", "us-east-1a"]}),
    ("aws", {"gpuZones": ["eu-west-1a", "eu-west-1b"]}),  # placement: one GPU zone
    ("aws", {"zones": ["us-east-1b", "eu-west-1a"], "gpuZones": ["us-east-1b", "eu-west-1a"],
             "interconnect": {"placement": False}}),  # AWS: one GPU zone all the same
    ("gcp", {"zones": ["europe-west4-a"]}),
    ("gcp", {"zones": ["europe-west4-a"], "gpuZones": ["europe-west4-b"]}),
    # Azure's region-named zone (eastus-1): its fix, not the name, is what the others follow
    ("azure", {"zones": ["eastus-1"], "gpuZones": ["2"]}),
    ("azure", {"zones": [], "gpuZones": ["1", "eastus-1"]}),
]


@pytest.mark.parametrize(("stack", "overrides"), CROSS_REGION_ZONES,
                         ids=[f"{s}-" + "-".join("-".join([k, *v]) if isinstance(v, list) else k
                                                 for k, v in o.items())
                              for s, o in CROSS_REGION_ZONES])
def test_zones_of_another_region_are_fixed_by_the_first_round_of_commands(
        tmp_path: Path, stack: str, overrides: dict[str, Any]) -> None:
    """aws in us-east-1 with zones [eu-west-1a] once drew three commands that undid each other
    (gpuZones[0] eu-west-1a, a zone another line removes; zones[1] us-east-1a, the zone just
    given to zones[0]): applied as printed they took three rounds. Now every suggested zone is
    of the stack's region, none is chosen twice, and one round, as printed, passes."""
    import re

    path = write_stack(tmp_path, stack)
    config = yaml.safe_load(path.read_text())
    for key, value in overrides.items():  # lists replace, not merge
        config["config"][f"{PROJECT}:{key}"] = value
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    result = check("--file", str(path))
    assert result.returncode == 1, result.stdout
    region = config["config"][f"{PROJECT}:region"]
    of_the_region = ((lambda zone: zone in {"1", "2", "3"}) if stack == "azure"
                     else (lambda zone: zone.startswith(region)))
    commands = [command for line in result.stderr.splitlines()  # in the order printed
                for command in re.findall(r"`(pulumi config (?:set|rm) [^`]*)`",
                                          line.split(", or ")[0])]
    assert commands, result.stderr
    for command in commands:
        if command.split()[2] == "set" and "ones[" in command:  # zones[i], gpuZones[i]
            assert of_the_region(command.split()[-1]), command
        run_config_command(path, command)
    result = check("--file", str(path))
    assert result.returncode == 0, result.stderr


def test_check_takes_any_stack_with_a_file_here_its_cloud_read_from_the_file(tmp_path,
                                                                              monkeypatch) -> None:
    """Walkthrough 8: `make check STACK=aws-prod` after copying the stack file, as the unknown
    stack message advises, failed with argparse's "invalid choice" (aws, azure, gcp)."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    import torchrec_cloud.check as check_module
    from torchrec_cloud.__main__ import main

    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    write_stack(tmp_path, "azure").rename(tmp_path / "Pulumi.azure-prod.yaml")
    write_stack(tmp_path, "aws")
    monkeypatch.setattr(check_module, "ROOT", tmp_path)

    def run(stack: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["check", "--stack", stack])
        return code, out.getvalue(), err.getvalue()

    code, out, err = run("azure-prod")
    assert code == 0, err
    assert "Pulumi.azure-prod.yaml: every setting is valid" in out
    assert "cloud        azure" in out  # read from the file, not from the stack's name
    assert "pulumi destroy --stack azure-prod" in out
    code, out, err = run("aws-staging")
    assert code == 2 and out == ""
    assert "no stack 'aws-staging' in this project (its stacks: aws, azure-prod;" in err
    assert "invalid choice" not in err
