"""The API's bodies as TypedDicts, generated from api/openapi.json by
scripts/gen_types.py: do not edit."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = ["BashArgs", "BashResult", "Context", "ContextList", "ContextNetwork", "ConversationEnded", "EditFileArgs", "EditFileResult", "ExecError", "FailureResult", "FileEntry", "FileInfo", "FileList", "ForkSandboxArgs", "ForkSandboxResult", "GlobArgs", "GlobResult", "GrepArgs", "GrepMatch", "GrepResult", "ListFilesArgs", "ListFilesResult", "Network", "ReadFileArgs", "ReadFileResult", "RichResult", "RunAnalysisArgs", "RunAnalysisResult", "RunCodeArgs", "RunCodeResult", "SuspendSandboxArgs", "SuspendSandboxResult", "Template", "TemplateList", "TemplateResources", "TemplateSettings", "TenantInfo", "Version", "WriteFileArgs", "WriteFileResult", "TOOLS", "Language"]

Language = Literal["python", "javascript", "typescript", "bash", "sh", "r", "java"]
"""The languages of run_code."""


class BashArgs(TypedDict):
    """The API's BashArgs."""

    command: str
    cwd: NotRequired[str]
    env: NotRequired[dict[str, str]]
    timeout: NotRequired[int]


class BashResult(TypedDict):
    """The API's BashResult."""

    userId: NotRequired[str]
    conversationId: str
    pathId: str
    success: bool
    stdout: str
    stderr: str
    exitCode: int
    signal: NotRequired[str]
    timedOut: NotRequired[bool]
    executionTimeMs: int
    sandboxId: str
    truncated: bool
    outputType: Literal["json", "table", "text", "error"]
    stateLost: NotRequired[bool]
    woken: NotRequired[bool]
    notice: NotRequired[str]
    error: NotRequired[ExecError]


class Context(TypedDict):
    """The API's Context."""

    id: NotRequired[str]
    tenantId: NotRequired[str]
    userId: NotRequired[str]
    conversationId: NotRequired[str]
    pathId: NotRequired[str]
    status: NotRequired[Literal["creating", "ready", "terminated", "error"]]
    terminationReason: NotRequired[Literal["expired", "error", "manual", "merged", "deleted", "archived", "rotated"]]
    sandboxId: NotRequired[str]
    provider: NotRequired[str]
    template: NotRequired[str]
    createdAt: NotRequired[str]
    lastUsedAt: NotRequired[str]
    expiresAt: NotRequired[str]
    terminatedAt: NotRequired[str]
    executionCount: NotRequired[int]
    totalExecutionTimeMs: NotRequired[int]
    lastError: NotRequired[str]
    resourceUsage: NotRequired[Any]
    metadata: NotRequired[dict[str, str]]
    node: NotRequired[str]
    suspended: NotRequired[bool]
    memory: NotRequired[bool]
    network: NotRequired[ContextNetwork]


class ContextList(TypedDict):
    """The API's ContextList."""

    contexts: list[Context]
    next: NotRequired[str]


class ContextNetwork(TypedDict):
    """A context's network policy; absent on a context without a network (loopback only). Header rules show the host and header names, never a value."""

    mode: Literal["none", "allowlist", "open"]
    allow: NotRequired[list[str]]
    deny: NotRequired[list[str]]
    headers: NotRequired[list[Any]]
    ingress: NotRequired[Any]
    secrets: NotRequired[list[str]]


class ConversationEnded(TypedDict):
    """The API's ConversationEnded."""

    userId: NotRequired[str]
    conversationId: str
    terminated: int


class EditFileArgs(TypedDict):
    """The API's EditFileArgs."""

    new_string: str
    old_string: str
    path: str
    replace_all: NotRequired[bool]


class EditFileResult(TypedDict):
    """The API's EditFileResult."""

    userId: NotRequired[str]
    conversationId: str
    pathId: str
    success: bool
    path: str
    replacements: int


class ExecError(TypedDict):
    """The API's ExecError."""

    name: str
    value: str
    traceback: str


class FailureResult(TypedDict):
    """The API's FailureResult."""

    userId: NotRequired[str]
    conversationId: str
    pathId: str
    success: bool
    error: ExecError
    retryable: bool
    stateLost: NotRequired[bool]


class FileEntry(TypedDict):
    """The API's FileEntry."""

    name: str
    path: str
    type: str
    size: int
    modTime: int


class FileInfo(TypedDict):
    """The API's FileInfo."""

    name: NotRequired[str]
    path: NotRequired[str]
    type: NotRequired[Literal["file", "dir", "symlink", "other"]]
    size: NotRequired[int]
    mode: NotRequired[int]
    modTime: NotRequired[int]
    owner: NotRequired[str]
    group: NotRequired[str]
    target: NotRequired[str]
    metadata: NotRequired[dict[str, str]]


class FileList(TypedDict):
    """The API's FileList."""

    path: NotRequired[str]
    entries: NotRequired[list[FileInfo]]


class ForkSandboxArgs(TypedDict):
    """The API's ForkSandboxArgs."""

    to_path: str


class ForkSandboxResult(TypedDict):
    """The API's ForkSandboxResult."""

    userId: NotRequired[str]
    conversationId: str
    pathId: str
    success: bool
    sourceContextId: str
    contextId: str
    forkPathId: str
    snapshotId: str
    memory: bool
    notice: str


class GlobArgs(TypedDict):
    """The API's GlobArgs."""

    path: NotRequired[str]
    pattern: str


class GlobResult(TypedDict):
    """The API's GlobResult."""

    userId: NotRequired[str]
    conversationId: str
    pathId: str
    paths: list[str]
    truncated: bool


class GrepArgs(TypedDict):
    """The API's GrepArgs."""

    glob: NotRequired[str]
    ignore_case: NotRequired[bool]
    path: NotRequired[str]
    pattern: str


class GrepMatch(TypedDict):
    """The API's GrepMatch."""

    path: str
    line: int
    text: str


class GrepResult(TypedDict):
    """The API's GrepResult."""

    userId: NotRequired[str]
    conversationId: str
    pathId: str
    matches: list[GrepMatch]
    truncated: bool


class ListFilesArgs(TypedDict):
    """The API's ListFilesArgs."""

    depth: NotRequired[int]
    path: NotRequired[str]


class ListFilesResult(TypedDict):
    """The API's ListFilesResult."""

    userId: NotRequired[str]
    conversationId: str
    pathId: str
    path: str
    entries: list[FileEntry]
    truncated: bool


class Network(TypedDict):
    """The network the call's context should have (docs/network.md). It shapes the context the call creates; on an existing context a different network replaces its policy (412 when the context was created without one). Absent: loopback only, or whatever the context has. The operator's caps refuse what the tenant may not have (403)."""

    mode: NotRequired[Literal["none", "allowlist", "open"]]
    allow: NotRequired[list[str]]
    deny: NotRequired[list[str]]
    headers: NotRequired[list[Any]]
    ingress: NotRequired[Any]
    secrets: NotRequired[list[str]]


class ReadFileArgs(TypedDict):
    """The API's ReadFileArgs."""

    limit: NotRequired[int]
    offset: NotRequired[int]
    path: str


class ReadFileResult(TypedDict):
    """The API's ReadFileResult."""

    userId: NotRequired[str]
    conversationId: str
    pathId: str
    path: str
    content: str
    startLine: int
    endLine: int
    totalLines: NotRequired[int]
    size: int
    truncated: bool


class RichResult(TypedDict):
    """One displayable value, Jupyter style; binary formats are base64."""

    main: NotRequired[bool]
    text: NotRequired[str]
    html: NotRequired[str]
    markdown: NotRequired[str]
    svg: NotRequired[str]
    png: NotRequired[str]
    jpeg: NotRequired[str]
    latex: NotRequired[str]
    json: NotRequired[Any]
    javascript: NotRequired[str]
    data: NotRequired[Any]
    chart: NotRequired[Any]


class RunAnalysisArgs(TypedDict):
    """The API's RunAnalysisArgs."""

    analysisType: Literal["tax_calculation", "compliance_check", "data_analysis", "custom"]
    code: NotRequired[str]
    env: NotRequired[dict[str, str]]
    language: NotRequired[Literal["python", "javascript"]]
    outputFormat: NotRequired[Literal["json", "text", "csv"]]
    parameters: dict[str, Any]
    timeout: NotRequired[int]


class RunAnalysisResult(TypedDict):
    """The API's RunAnalysisResult."""

    userId: NotRequired[str]
    conversationId: str
    pathId: str
    success: bool
    analysisType: str
    outputFormat: str
    builtin: bool
    stdout: str
    stderr: str
    exitCode: int
    result: Any
    parsedOutput: Any
    parseError: NotRequired[str]
    error: NotRequired[ExecError]
    timedOut: NotRequired[bool]
    executionTimeMs: int
    sandboxId: str
    truncated: bool
    outputType: Literal["json", "table", "text", "error"]
    rotated: NotRequired[bool]
    stateLost: NotRequired[bool]
    notice: NotRequired[str]


class RunCodeArgs(TypedDict):
    """The API's RunCodeArgs."""

    code: str
    description: NotRequired[str]
    env: NotRequired[dict[str, str]]
    ipython: NotRequired[bool]
    language: Literal["python", "javascript", "typescript", "bash", "sh", "r", "java"]
    template: NotRequired[str]
    timeout: NotRequired[int]


class RunCodeResult(TypedDict):
    """The API's RunCodeResult."""

    userId: NotRequired[str]
    conversationId: str
    pathId: str
    success: bool
    stdout: str
    stderr: str
    exitCode: int
    executionTimeMs: int
    sandboxId: str
    contextId: NotRequired[str]
    results: list[RichResult]
    error: ExecError | None
    timedOut: NotRequired[bool]
    kernelRestarted: NotRequired[bool]
    rotated: NotRequired[bool]
    stateLost: NotRequired[bool]
    woken: NotRequired[bool]
    restored: NotRequired[bool]
    notice: NotRequired[str]
    truncated: bool
    outputType: Literal["json", "table", "text", "error"]


class SuspendSandboxArgs(TypedDict):
    """The API's SuspendSandboxArgs."""

    pass


class SuspendSandboxResult(TypedDict):
    """The API's SuspendSandboxResult."""

    userId: NotRequired[str]
    conversationId: str
    pathId: str
    success: bool
    contextId: str
    memory: bool
    notice: str


class Template(TypedDict):
    """The API's Template."""

    id: str
    name: str
    public: bool
    builtIn: NotRequired[bool]
    image: NotRequired[str]
    source: NotRequired[str]
    settings: TemplateSettings
    createdAt: NotRequired[str]


class TemplateList(TypedDict):
    """The API's TemplateList."""

    templates: list[Template]


class TemplateResources(TypedDict):
    """Defaults for the template's sandboxes' limits; 0: the daemon's. A tenant's template may only lower the daemon's limits."""

    cpus: NotRequired[float]
    memoryBytes: NotRequired[int]
    diskBytes: NotRequired[int]
    pids: NotRequired[int]


class TemplateSettings(TypedDict):
    """The API's TemplateSettings."""

    user: NotRequired[str]
    workdir: NotRequired[str]
    env: NotRequired[dict[str, str]]
    startCmd: NotRequired[str]
    kernels: NotRequired[list[Literal["python", "javascript", "typescript", "bash", "sh", "r", "java"]]]
    prestart: NotRequired[list[Literal["python", "javascript", "typescript", "bash", "sh", "r", "java", "ipython"]]]
    idleSuspendSeconds: NotRequired[int]
    resources: NotRequired[TemplateResources]


class TenantInfo(TypedDict):
    """The API's TenantInfo."""

    id: str
    name: str
    admin: NotRequired[bool]


class Version(TypedDict):
    """The API's Version."""

    version: str
    commit: NotRequired[str]
    schemaVersion: int


class WriteFileArgs(TypedDict):
    """The API's WriteFileArgs."""

    content: str
    path: str


class WriteFileResult(TypedDict):
    """The API's WriteFileResult."""

    userId: NotRequired[str]
    conversationId: str
    pathId: str
    success: bool
    path: str
    size: int


TOOLS: dict[str, type] = {
    "bash": BashArgs,
    "edit_file": EditFileArgs,
    "fork_sandbox": ForkSandboxArgs,
    "glob": GlobArgs,
    "grep": GrepArgs,
    "list_files": ListFilesArgs,
    "read_file": ReadFileArgs,
    "run_analysis": RunAnalysisArgs,
    "run_code": RunCodeArgs,
    "suspend_sandbox": SuspendSandboxArgs,
    "write_file": WriteFileArgs,
}
"""The tools the document types, by name: their arguments."""
