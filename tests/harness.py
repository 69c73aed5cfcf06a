"""Run the real `__main__.py` under Pulumi mocks, as `pulumi up --stack X` would, and capture it all.

Every registered resource is recorded with its type, name, inputs, provider, parent and
dependencies, so tests can read like policies: "the spot pool is spot", "the job waits for the
file system". docs/testing.md says what the suite runs and why.
"""

from __future__ import annotations

import asyncio
import copy
import json
import runpy
import threading
import unittest.mock
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.proto import resource_pb2

from infra.previous_run import READ_STACK_OUTPUTS
from tests.fakes import azure as azure_fakes
from tests.fakes import gcp as gcp_fakes
from tests.fakes import fake_call, fake_outputs

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "torchrec-cloud"
STACKS = ("aws", "azure", "gcp")
ORGANIZATION = "organization"  # the local backend's name for it


@dataclass
class Captured:
    """One resource registration as the engine would have received it."""

    urn: str
    type: str
    name: str
    inputs: dict[str, Any]
    custom: bool
    provider: str = ""  # "<provider URN>::<id>", empty for the default provider
    parent: str = ""
    dependencies: list[str] = field(default_factory=list)
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    retain_on_delete: bool = False
    protect: bool = False
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)
    delete_before_replace: bool = False
    import_id: str = ""  # the `import` option: an existing resource adopted, not created
    # The `transforms` option (functions): what they do to a component's children (which
    # mocks never create) is tested by calling them.
    transforms: list[Any] = field(default_factory=list)

    @property
    def provider_urn(self) -> str:
        return self.provider.rsplit("::", 1)[0] if self.provider else ""


class RecordingMocks(pulumi.runtime.Mocks):
    """Answers every resource and invoke with realistic fake outputs (tests/fakes); the stack's
    own earlier outputs (infra/previous_run.py) are `previous_outputs` (empty: a first run)."""

    def __init__(self, previous_outputs: dict[str, Any] | None = None) -> None:
        self.lock = threading.Lock()
        self.outputs_by_name: dict[tuple[str, str], dict[str, Any]] = {}
        self.transforms_by_name: dict[tuple[str, str], list[Any]] = {}
        self.previous_outputs = dict(previous_outputs or {})

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict]:
        outputs = {"name": args.name, **args.inputs, **fake_outputs(args)}
        resource_id = outputs.get("id") or f"{args.name}-id"
        with self.lock:
            self.outputs_by_name[(args.typ, args.name)] = outputs
            self.transforms_by_name[(args.typ, args.name)] = list(args.transforms)
        return resource_id, outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
        if args.token == READ_STACK_OUTPUTS:
            return {"name": args.args.get("name"), "outputs": self.previous_outputs,
                    "secretOutputNames": []}
        return fake_call(args)


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The mock monitor, plus a record of what each registration depended on."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.captured: dict[str, Captured] = {}
        self.lock = threading.Lock()

    def GetDeploymentInfo(self, request: Any) -> Any:  # noqa: N802 (gRPC name)
        info = super().GetDeploymentInfo(request)
        # Resource references hang remote components under mocks (TESTING.md): turn them off.
        features = [
            f for f in info.supportedFeatures
            if f != resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES
        ]
        # Aliases go to RegisterResource as specs; _alias_urn_never_read depends on it.
        assert resource_pb2.RESOURCE_MONITOR_FEATURE_ALIAS_SPECS in features, features
        return resource_pb2.DeploymentInfo(supportedFeatures=features)

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802
        response = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            return response
        inputs = _deserialize(request.object)
        captured = Captured(
            urn=response.urn,
            type=request.type,
            name=request.name,
            inputs=inputs,
            custom=bool(request.custom),
            provider=request.provider,
            parent=request.parent,
            dependencies=list(request.dependencies),
            property_dependencies={
                key: list(value.urns) for key, value in request.propertyDependencies.items()
            },
            retain_on_delete=bool(getattr(request, "retainOnDelete", False)),
            protect=bool(getattr(request, "protect", False)),
            ignore_changes=list(getattr(request, "ignoreChanges", [])),
            replace_on_changes=list(getattr(request, "replaceOnChanges", [])),
            delete_before_replace=bool(getattr(request, "deleteBeforeReplace", False)),
            import_id=str(getattr(request, "importId", "") or ""),
            outputs=self.mocks.outputs_by_name.get((request.type, request.name), {}),
            transforms=self.mocks.transforms_by_name.get((request.type, request.name), []),
        )
        with self.lock:
            self.captured[response.urn] = captured
        return response


def _alias_urn_never_read(alias: Any, name: str, type_: str, parent: Any) -> None:
    """Stands in for `pulumi.resource.collapse_alias_to_urn` during a program run.

    `Resource.__init__` (pulumi 3.272, pulumi/resource.py) turns every alias into a URN Output
    up front and keeps them in `_aliases`, which only `runtime.resource.all_aliases` reads, for
    an engine without alias specs. The monitor here has them (RecordingMonitor keeps
    RESOURCE_MONITOR_FEATURE_ALIAS_SPECS, as today's engine does): aliases still reach
    RegisterResource as specs, and the URNs are never read. Each azure-native resource carries
    an alias for every older API version (about 20): building their Outputs was two thirds of
    an Azure run's CPU (measured)."""
    return None


def _no_stack_trace() -> Any:
    """What the SDK sends the engine as the Python stack of each registration (source
    positions for the engine's diagnostics, read by no test and dropped by the mock monitor):
    left empty, as the SDK itself sends it when it finds no user frame. Extracting a traceback
    per resource was about a tenth of a mock run."""
    from pulumi.runtime.proto import source_pb2

    return source_pb2.StackTrace()


def _deserialize(struct: Any) -> dict[str, Any]:
    """The registration's inputs, decoded the way the mock monitor decodes them."""
    from pulumi.runtime import rpc

    pulumi_mocks._ensure_event_loop()  # noqa: SLF001 (the mock monitor does the same)
    return rpc.deserialize_properties(struct)


class Run:
    """The outcome of one program run: captured resources, stack outputs, or the error."""

    def __init__(self, stack: str, captured: dict[str, Captured], outputs: dict[str, Any],
                 secret_outputs: set[str], error: BaseException | None) -> None:
        self.stack = stack
        self.by_urn = captured
        self.resources = list(captured.values())
        self.outputs = outputs
        self.secret_outputs = secret_outputs  # names of stack outputs that are secrets
        self.error = error

    # --- finding ---------------------------------------------------------------------------
    def of_type(self, type_: str) -> list[Captured]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name_contains: str = "") -> Captured:
        found = [r for r in self.of_type(type_) if name_contains in r.name]
        assert len(found) == 1, (
            f"expected one {type_} named *{name_contains}*, found {[r.name for r in found]}; "
            f"types here: {sorted({r.type for r in self.resources})}"
        )
        return found[0]

    def named(self, name: str) -> Captured:
        found = [r for r in self.resources if r.name == name]
        assert len(found) == 1, f"expected one resource named {name}, found {len(found)}"
        return found[0]

    def types(self) -> set[str]:
        return {r.type for r in self.resources}

    def children_of(self, resource: Captured) -> list[Captured]:
        return [r for r in self.resources if r.parent == resource.urn]

    # --- ordering --------------------------------------------------------------------------
    def _direct(self, resource: Captured) -> set[str]:
        edges = set(resource.dependencies)
        for urns in resource.property_dependencies.values():
            edges.update(urns)
        if resource.provider_urn:
            edges.add(resource.provider_urn)
        return edges

    def _expand(self, urn: str) -> set[str]:
        """A component stands for itself and everything under it (Pulumi waits for children)."""
        out = {urn}
        for child in (r for r in self.resources if r.parent == urn):
            out |= self._expand(child.urn)
        return out

    def waits_for(self, later: Captured, earlier: Captured) -> bool:
        """True when `later` cannot be created before `earlier` exists (transitively)."""
        seen: set[str] = set()
        todo = [later.urn]
        while todo:
            urn = todo.pop()
            node = self.by_urn.get(urn)
            if node is None:
                continue
            for dep in self._direct(node):
                for expanded in self._expand(dep):
                    if expanded == earlier.urn:
                        return True
                    if expanded not in seen:
                        seen.add(expanded)
                        todo.append(expanded)
        return False


# The one value every user sets before `pulumi up` (the README's configure step: their own
# public address, /32); the shipped stack files leave it out on purpose. A public address (one
# MaxMind's GeoIP tests use): documentation, private, CGNAT and loopback ranges are refused.
USER_API_CIDRS = ["81.2.69.142/32"]
# GCP's other value only the user knows (the shipped file carries no placeholder for it).
USER_GCP_PROJECT = "torchrec-ci-01"


def shipped_stack_config(stack: str) -> dict[str, Any]:
    """The stack file exactly as shipped, keyed like `pulumi up` passes them ("<project>:<key>")."""
    data = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    return dict(data.get("config") or {})


def stack_config(stack: str) -> dict[str, Any]:
    """The stack file after the user's configure step (kubernetes.apiAccessCidrs set, and on
    GCP gcp.project)."""
    config = shipped_stack_config(stack)
    kubernetes = dict(config.get(f"{PROJECT}:kubernetes") or {})
    kubernetes.setdefault("apiAccessCidrs", USER_API_CIDRS)
    config[f"{PROJECT}:kubernetes"] = kubernetes
    if stack == "gcp":
        config[f"{PROJECT}:gcp"] = {"project": USER_GCP_PROJECT,
                                    **(config.get(f"{PROJECT}:gcp") or {})}
    return config


def _deep_merge(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        merged = copy.deepcopy(base)
        for key, value in override.items():
            merged[key] = _deep_merge(merged.get(key), value)
        return merged
    return copy.deepcopy(override)


def config_for(stack: str, overrides: dict[str, Any] | None = None,
               remove: Iterable[str] = ()) -> dict[str, str]:
    """Stack config as strings (structured values as JSON), with overrides deep-merged in."""
    config = stack_config(stack)
    for key, value in (overrides or {}).items():
        full = f"{PROJECT}:{key}"
        config[full] = _deep_merge(config.get(full), value)
    for key in remove:
        config.pop(f"{PROJECT}:{key}", None)
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


def run_stack(stack: str, overrides: dict[str, Any] | None = None,
              remove: Iterable[str] = (), expect_error: bool = False,
              previous_outputs: dict[str, Any] | None = None,
              stack_name: str | None = None) -> Run:
    """Run __main__.py for a stack under mocks; raise its error unless expect_error.
    `previous_outputs`: the stack outputs of an earlier `pulumi up` (a later run); None, a
    first run or one after `pulumi destroy`. `stack_name`: the Pulumi stack's name when it is not
    the stack file's (production-a with Pulumi.aws.yaml's settings)."""
    pulumi.runtime.settings.set_root_resource(None)
    asyncio.set_event_loop(asyncio.new_event_loop())
    mocks = RecordingMocks(previous_outputs)
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_all_config(config_for(stack, overrides, remove))
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack_name or stack, preview=False, monitor=monitor,
                             organization=ORGANIZATION)

    outputs: dict[str, Any] = {}
    secret_outputs: set[str] = set()

    @pulumi.runtime.test
    def program() -> Any:
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
        root = pulumi.runtime.settings.get_root_resource()
        exports = dict(root.outputs) if root is not None else {}
        names = list(exports)
        values = [pulumi.Output.from_input(v) for v in exports.values()]
        secrecy = [pulumi.Output.from_input(asyncio.ensure_future(v.is_secret())) for v in values]

        def keep(resolved: list[Any]) -> None:
            count = len(names)
            outputs.update(dict(zip(names, resolved[:count])))
            secret_outputs.update(n for n, secret in zip(names, resolved[count:]) if secret)

        return pulumi.Output.unsecret(pulumi.Output.all(*values, *secrecy)).apply(keep) if names else None

    error: BaseException | None = None
    try:
        with unittest.mock.patch("pulumi.resource.collapse_alias_to_urn", _alias_urn_never_read), \
                unittest.mock.patch("infra.azure.acr_login.post_form", azure_fakes.acr_exchange), \
                unittest.mock.patch("infra.azure.versions.get_json", azure_fakes.arm_get), \
                unittest.mock.patch("infra.azure.kube_access.post_json", azure_fakes.access_review), \
                unittest.mock.patch("infra.gcp.quotas.get_json", gcp_fakes.compute_get), \
                unittest.mock.patch("pulumi.runtime.resource._get_stack_trace", _no_stack_trace):
            program()
    except BaseException as caught:  # noqa: BLE001 (the program's own error is the result)
        if not expect_error:
            raise
        error = caught
    finally:
        asyncio.get_event_loop().close()
    if expect_error and error is None:
        raise AssertionError(f"stack {stack} ran without the expected error")
    return Run(stack, dict(monitor.captured), outputs, secret_outputs, error)


Check = Callable[[Run], None]


JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"


def training_pod_template(run: Run) -> dict[str, Any]:
    """The training pods' template (metadata and spec), whichever job kind the stack made."""
    jobsets = run.of_type(JOBSET)
    if jobsets:
        (replicated,) = jobsets[0].inputs["spec"]["replicatedJobs"]
        return replicated["template"]["spec"]["template"]
    job = run.one("kubernetes:kubeflow.org/v1:PyTorchJob")
    return job.inputs["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
