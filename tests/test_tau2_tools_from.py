"""`grade import tau2 --tools-from`: the tools a tau2 toolkit declares (tests/fixtures/tau2_tools,
written in tau2's style for this test) become stubs under their names, with their signatures,
docstrings and read/write marks, read from the file as syntax and never run; hostile files are
refused or their odd tools skipped, by name."""

import ast
import json
import re
import shutil
import sqlite3

import pytest
from conftest import ROOT, run_tool

from endstate.core.env.domain import Domains
from endstate.core.env.nested import Mapping, rebuild_document
from endstate.core.errors import InputError
from endstate.grade.authoring.tau2_declared import MAX_DOC, generated_tools
from endstate.grade.authoring.tau2_toolkit import read_toolkit

GUIDE = ROOT / "docs" / "authoring.md"
MINI = ROOT / "tests" / "fixtures" / "tau2_mini"
KIT = ROOT / "tests" / "fixtures" / "tau2_tools" / "tools.py"
DECLARED = ["transfer_to_human_agents", "get_customer_details", "get_bike", "rent_bike",
            "return_bike", "log_service", "list_rentals", "flag_bike", "think"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("tools_from") / "cyclehire"
    p = run_tool("grade", "import", "tau2", str(MINI), "--out", str(out),
                 "--tools-from", f"{KIT}:CycleTools")
    assert p.returncode == 0, p.stderr
    return out, p.stderr


def fixture_docstrings() -> dict[str, str]:
    tree = ast.parse(KIT.read_text())
    return {f.name: ast.get_docstring(f) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}


def test_every_declared_tool_is_a_stub_with_tau2s_signature_docstring_and_mark(imported):
    out, stderr = imported
    tools = Domains([str(out)])["cyclehire"].tools
    assert list(tools) == DECLARED  # the base class's first; no helper, assertion or discoverable
    assert {n for n, t in tools.items() if t.writes} == {"rent_bike", "return_bike", "log_service",
                                                        "flag_bike"}  # WRITE, or mutates_state
    docs = fixture_docstrings()
    for name, t in tools.items():
        assert t.fn.__doc__.replace("\n    ", "\n").strip() == docs[name]
    listing = tools["list_rentals"].parameters
    assert listing["required"] == ["customer_id"]
    assert listing["properties"]["status"] == {
        "anyOf": [{"type": "string", "enum": ["active", "returned"]}, {"type": "null"}],
        "description": "Only rentals in this status.", "default": None}
    assert listing["properties"]["limit"]["default"] == 10
    assert listing["properties"]["tags"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}
    flag = tools["flag_bike"].parameters["properties"]
    assert flag["reason"]["enum"] == ["flat_tyre", "customer_request", "other"]
    assert flag["readings"]["additionalProperties"] == {"type": "number"}
    assert "tools are code" in stderr and "9 tools CycleTools declares" in stderr
    assert "not stubbed: 1 @is_discoverable_tool method (secret_discount_1234)" in stderr


def test_a_pydantic_parameter_is_a_typeddict_of_its_fields(imported):
    """Read from the data model beside tools.py: a field with a default is optional, an Enum is
    its values, a forward reference and a description are followed."""
    entry = Domains([str(imported[0])])["cyclehire"].tools["log_service"].parameters[
        "properties"]["entry"]
    assert entry["required"] == ["date"]
    assert entry["properties"]["date"]["description"] == "The day of the service, YYYY-MM-DD"
    assert entry["properties"]["mechanic"] == {"type": "string", "enum": ["ana", "leo"]}
    assert entry["properties"]["parts"]["items"]["properties"] == {
        "name": {"type": "string"}, "cost": {"type": "number"}}


def test_the_stubs_fail_as_not_written_until_written(imported):
    out, _ = imported
    p = run_tool("grade", "validate", "--domains", str(out), str(out / "tasks" / "cyclehire.jsonl"))
    assert p.returncode == 1
    assert "tool rent_bike is not written yet" in p.stderr
    assert "tool get_bike is not written yet" in p.stderr


def test_a_parameter_named_like_the_stub_s_own_names_does_not_break_it(tmp_path):
    """tau2's get_customer_details with parameters ToolError and NOT_WRITTEN: its stub still
    fails as "not written yet" (the shadowed names were a TypeError at every call)."""
    kit = tmp_path / "kit"
    shutil.copytree(KIT.parent, kit)
    source = (kit / "tools.py").read_text()
    shadowing = source.replace("def get_customer_details(self, customer_id: str)",
                               "def get_customer_details(self, customer_id: str, ToolError: str = '', "
                               "NOT_WRITTEN: int = 0)")
    assert shadowing != source
    (kit / "tools.py").write_text(shadowing)
    out = tmp_path / "cyclehire"
    p = run_tool("grade", "import", "tau2", str(MINI), "--out", str(out), "--tools-from",
                 f"{kit / 'tools.py'}:CycleTools")
    assert p.returncode == 0, p.stderr
    p = run_tool("grade", "validate", "--domains", str(out), str(out / "tasks" / "cyclehire.jsonl"))
    assert "tool get_customer_details is not written yet" in p.stderr, p.stderr
    assert "TypeError" not in p.stderr


def test_without_the_option_the_report_names_it(tmp_path):
    p = run_tool("grade", "import", "tau2", str(MINI), "--out", str(tmp_path / "cyclehire"))
    assert p.returncode == 0, p.stderr
    assert "--tools-from TAU2_DOMAIN_SRC/tools.py gives a stub for every tool tau2 declares" in p.stderr


def test_a_file_of_several_toolkits_needs_the_class(tmp_path):
    p = run_tool("grade", "import", "tau2", str(MINI), "--out", str(tmp_path / "x"),
                 "--tools-from", str(KIT))
    assert p.returncode == 4
    assert (f"declares 2 toolkits, CycleTools (9 tools), CycleUserTools (1 tools); name the "
            f"agent's one: --tools-from {KIT}:CycleTools") in p.stderr
    assert not (tmp_path / "x").exists()
    with pytest.raises(InputError, match="no toolkit class 'Nope'; it declares CycleBaseTools, "
                                         "CycleTools, CycleUserTools"):
        read_toolkit(f"{KIT}:Nope")


@pytest.mark.parametrize("text, code, message", [
    ("class T(ToolKitBase):\n    @is_tool(ToolType.READ)\n    def f(self) -> str\n", 4,
     "tools.py:3: not Python that parses (expected ':')"),
    (b"\xff\xfe = 1\n", 4, "tools.py:1: not Python that parses ((unicode error)"),
    ("x = 1\x00\n", 4, "tools.py: not Python that parses (source code string cannot contain "
                       "null bytes)"),
    ("x = " + "(" * 5000 + ")" * 5000 + "\n", 4, "tools.py:1: not Python that parses (too many "
                                                  "nested parentheses)"),
    ("class T:\n    def f(self) -> str:\n        'Reads.'\n", 4,
     "tools.py: no toolkit class: no class has a method decorated @is_tool(ToolType...)"),
    (None, 5, "tools.py: cannot read it (No such file or directory)"),
])
def test_a_file_that_is_no_toolkit_is_refused(tmp_path, text, code, message):
    path = tmp_path / "tools.py"
    if text is not None:
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    p = run_tool("grade", "import", "tau2", str(MINI), "--out", str(tmp_path / "x"),
                 "--tools-from", str(path))
    assert p.returncode == code, p.stderr
    assert message in p.stderr


ODD = '''
from data_model import Db, Loop
from helpers import Gadget

LIMIT = 5


class Odd(ToolKitBase):
    @is_tool(ToolType.READ)
    def print(self, text: str) -> str:
        """A builtin's name."""

    @is_tool(ToolType.READ)
    def tool(self) -> str:
        """The name of endstate's decorator."""

    @is_tool(ToolType.WRITE)
    def many(self, *names: str) -> str:
        """Takes *args."""

    @is_tool(ToolType.READ)
    def quoted(self, db: str, limit: int = LIMIT, when: Frobnicator = None, box: Db = None,
               loop: Loop = None, gadget: Gadget = None) -> str:
        """Says \\"\\"\\"hi\\"\\"\\" with a \\\\ backslash, a form feed\\x0c and ends with a quote\\""""

    @is_tool(ToolType.READ)
    def pipes(self, mode: Union[Literal["a | c"], Literal["b | c"]] | None) -> str:
        """Literals that hold the union bar stay whole."""

    @is_tool
    def huge(self) -> str:
        """HUGE"""

    @is_tool(ToolType.WRITE)
    def bare(self, a: int, b=3) -> str:
        pass
'''
ODD_MODEL = '''
class Db(BaseModel):
    x: int


class Loop(BaseModel):
    name: str
    next: Optional["Loop"] = None
'''


def test_odd_tools_are_skipped_or_noted_and_the_stubs_load(tmp_path):
    (tmp_path / "tools.py").write_text(ODD.replace("HUGE", "word " * (MAX_DOC // 4)))
    (tmp_path / "data_model.py").write_text(ODD_MODEL)
    (tmp_path / "helpers.py").write_text("class Gadget(BaseModel):\n    def (\n")
    kit = read_toolkit(str(tmp_path / "tools.py"))
    generated = generated_tools("odd", {"bare": [{"a": 1, "c": 2}], "extra": [{"n": 1}]}, kit)
    namespace: dict = {"__file__": str(tmp_path / "tools.py")}
    exec(compile(generated.source, "tools.py", "exec"), namespace)
    tools = {n: v.__endstate_tool__ for n, v in namespace.items() if hasattr(v, "__endstate_tool__")}
    assert list(tools) == ["quoted", "pipes", "huge", "bare", "extra"]
    assert generated.skipped == [
        ("print", "would replace a Python builtin or special name that tools.py uses"),
        ("tool", "would replace the name tool that tools.py imports or defines"),
        ("many", "takes *args or **kwargs, which no JSON schema lists: write it by hand")]
    assert tools["quoted"].fn.__doc__ == 'Says """hi""" with a \\ backslash, a form feed\x0c and ' \
                                         'ends with a quote"'
    quoted = tools["quoted"].parameters["properties"]
    assert list(quoted) == ["db", "limit", "when", "box", "loop", "gadget"]  # handle: `database`
    assert quoted["limit"]["default"] is None  # LIMIT is no literal
    assert quoted["box"]["anyOf"][0]["properties"] == {"x": {"type": "integer"}}  # class Db2
    assert quoted["loop"]["anyOf"][0]["properties"]["next"] == {
        "anyOf": [{"type": "object"}, {"type": "null"}]}
    assert tools["pipes"].parameters["properties"]["mode"]["anyOf"] == [
        {"anyOf": [{"type": "string", "enum": ["a | c"]}, {"type": "string", "enum": ["b | c"]}]},
        {"type": "null"}]
    assert len(tools["huge"].fn.__doc__) == MAX_DOC + 4
    assert tools["extra"].fn.__doc__.startswith("Not written yet: what extra does")
    assert generated.inferred == ["extra"]
    lines = "\n".join(generated.report(tmp_path / "out" / "tools.py"))
    for note in ("quoted: argument limit: its default is no JSON value: the stub's default is None",
                 "quoted: argument when: type Frobnicator is defined neither in",
                 "model Loop holds itself: that field is annotated dict",
                 f"{tmp_path / 'helpers.py'}:2: not Python that parses (invalid syntax); left out, "
                 "so the types it defines are annotated dict",
                 "quoted: argument gadget: type Gadget is defined neither in",
                 "huge: @is_tool names no ToolType; marked as reading",
                 f"huge: docstring of {len('word ' * (MAX_DOC // 4)):,} characters cut",
                 "bare: no docstring: the agent's description is a placeholder",
                 "bare: argument b: a parameter without annotation has no endstate hint",
                 "bare: gold calls pass c, which tau2's signature does not take",
                 "gold calls use tools Odd does not declare, stubbed from their arguments as "
                 "without --tools-from: extra"):
        assert note in lines


def test_the_file_is_never_run(tmp_path):
    """The fixture raises SystemExit at import; here a toolkit that would write a file if run."""
    marker = tmp_path / "ran"
    kit = tmp_path / "src" / "tools.py"
    kit.parent.mkdir()
    kit.write_text(f"open({str(marker)!r}, 'w').close()\n\n\nclass T(ToolKitBase):\n"
                   "    @is_tool(ToolType.READ)\n    def get_bike(self, bike_id: str) -> str:\n"
                   "        '''A bike.'''\n")
    mini = tmp_path / "mini"
    shutil.copytree(MINI, mini)
    out = tmp_path / "cyclehire"
    p = run_tool("grade", "import", "tau2", str(mini), "--out", str(out), "--tools-from", str(kit))
    assert p.returncode == 0, p.stderr
    assert not marker.exists()
    assert "gold calls use tools T does not declare" in p.stderr
    assert json.loads((out / "seed" / "mapping.json").read_text())["format"] == 1


def guide_ports() -> dict[str, str]:
    """The guide's ```python tau2-port=NAME blocks (section 7), by NAME."""
    return dict(re.findall(r"^```python tau2-port=(\w+)\n(.*?)^```$", GUIDE.read_text(), re.M | re.S))


def test_the_guide_shows_the_stub_the_import_writes_and_counts_lines_right(imported):
    ports = guide_ports()
    assert list(ports) == ["stub", "rows", "documents"]
    assert ports["stub"] in (imported[0] / "tools.py").read_text()
    table = dict(re.findall(r"^\| (\w+) \| (\d+) \| (?:\d+) \|$", GUIDE.read_text(), re.M))
    assert table == {name: str(len(body.splitlines())) for name, body in ports.items()}


@pytest.mark.parametrize("version", ["rows", "documents"])
def test_either_port_in_the_guide_makes_every_task_sound(imported, tmp_path, version):
    """Each body of rent_bike, with test_import_tau2's other three tools: validate passes and the
    gold of the rental task leaves the same document."""
    from test_import_tau2 import WRITTEN_TOOLS

    out = tmp_path / "cyclehire"
    shutil.copytree(imported[0], out)
    others = WRITTEN_TOOLS[:WRITTEN_TOOLS.index("@tool(writes=True)\ndef rent_bike")]
    (out / "tools.py").write_text(
        'from pathlib import Path\n\nfrom endstate.api import Documents\n'
        + others + 'DOCS = Documents(Path(__file__).parent / "seed" / "mapping.json")\n\n\n'
        + guide_ports()[version])
    tasks = out / "tasks" / "cyclehire.jsonl"
    p = run_tool("grade", "validate", "--domains", str(out), str(tasks))
    assert p.returncode == 0, p.stderr
    assert all(json.loads(line)["sound"] for line in p.stdout.splitlines())
    gold = tmp_path / "gold.db"
    p = run_tool("grade", "state", "--gold", "--task", "cyclehire-2", "--domains", str(out),
                 "--tasks", str(tasks), "-o", str(gold))
    assert p.returncode == 0, p.stderr
    document = rebuild_document(sqlite3.connect(gold),
                                Mapping.from_json((out / "seed" / "mapping.json").read_bytes()))
    expected = json.loads((MINI / "db.json").read_text())
    expected["rentals"]["R1003"] = {
        "rental_id": "R1003", "customer_id": "tom_baker_2", "bike_id": "B-03", "hours": 2,
        "status": "active", "charges": [{"payment_id": "card_1111", "amount": 16.5}],
        "returned_at": None}
    tom = expected["customers"]["tom_baker_2"]
    tom.update(verified=True, rentals=["R1003"])  # verified and gift_9: the task's init
    tom["payment_methods"]["gift_9"] = {"source": "gift_card", "id": "gift_9", "balance": 10}
    expected["bikes"]["B-03"]["available"] = False
    assert document == expected
