"""A study of several policies with the tools alone: policies in the key, the models × domains
table, compare's costs, the per-task tally, the report page (opened in a real browser)."""

from __future__ import annotations

import html.parser
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from study import BASE, DOMAINS, PROMPTING, TRAINED, study, write

from endstate.evalstats.cli import cli
from endstate.evalstats.render import pct, usd


def run(args, input=None):
    return CliRunner().invoke(cli, args, input=input)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("study")
    base, trained, graded = study()
    return {"base": write(tmp / "base.jsonl", base), "trained": write(tmp / "trained.jsonl", trained),
            "graded": write(tmp / "graded.jsonl", graded), "records": (base, trained, graded),
            "tmp": tmp}


def both(files) -> str:
    return Path(files["base"]).read_text() + Path(files["trained"]).read_text()


# --- policy in the key ------------------------------------------------------------------------------

def test_two_policies_concatenated_are_read_without_renumbering(files):
    result = run(["--by", "model"], input=both(files))
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert sorted(report["by_model"]) == sorted([BASE, TRAINED])
    assert report["overall"]["attempts"] == 320 and report["by_model"][BASE]["attempts"] == 160
    # the default k is what each policy's tasks answer: 8 attempts each, not 16 pooled
    assert list(report["by_model"][TRAINED]["pass_at_k"]) == ["1", "5", "8"]


def test_a_policy_read_twice_is_an_error_naming_both_lines(files, tmp_path):
    again = shutil.copy(files["base"], tmp_path / "again.jsonl")
    result = run([files["base"], str(again)])
    assert result.exit_code == 4
    assert result.stderr.startswith(f"{again}:1: duplicate attempt: task_id 'bank-task-0' attempt 0 "
                                    f"of model '{BASE}' is already at {files['base']}:1 (the same "
                                    "model and prompting)")


def test_prompting_is_part_of_the_policy(files, tmp_path):
    """The same model prompted two ways is two policies: no duplicate; --by policy tells them
    apart, --by model pools them and says so."""
    base = files["records"][0]
    other = [{**r, "prompting": {**PROMPTING, "few_shot": False}} for r in base]
    path = write(tmp_path / "two.jsonl", [*base, *other])
    by_model = run(["--by", "model", path])
    assert by_model.exit_code == 0 and "--by policy tells them apart" in by_model.stderr
    assert list(orjson.loads(by_model.stdout)["by_model"]) == [BASE]
    by_policy = orjson.loads(run(["--by", "policy", path]).stdout)["by_policy"]
    assert sorted(by_policy) == [f"{BASE} [few_shot=False]", f"{BASE} [few_shot=True]"]
    reordered = [{**r, "prompting": dict(reversed(list(r["prompting"].items())))} for r in base]
    assert run([write(tmp_path / "same.jsonl", [*base, *reordered])]).exit_code == 4


def test_a_group_pooling_policies_has_no_pass_at_k_and_each_policy_is_reported(files):
    """Two policies' 8 attempts of a task pooled are 16 attempts of no policy: `overall` and
    every by_domain group had pass@16-like figures ("16/16"). Each policy is its own group now,
    exactly the summary of its file alone; a pooled group keeps pass@1 (the share of successful
    attempts, hand-counted here) and says how many policies it pools."""
    result = run(["--by", "domain", files["base"], files["trained"]])
    assert result.exit_code == 0, result.output
    assert ("the attempts come from 2 policies: by_policy reports each; `overall` pools them, "
            "without pass@k, pass^k or k/k") in result.stderr
    report = orjson.loads(result.stdout)
    for group in (report["overall"], *report["by_domain"].values()):
        assert group["policies"] == 2
        assert all(v is None for k, v in group["pass_at_k"].items() if k != "1")
        assert all(v is None for k, v in group["pass_hat_k"].items() if k != "1")
        assert (group["observed_all"]["count"], group["observed_all"]["ci95"]) == (None, None)
        assert group["cost"]["per_reliable_task_usd"] is None
    records = files["records"][0] + files["records"][1]
    assert report["overall"]["pass_at_1"] == sum(r["reward"] for r in records) / len(records)
    for model, path in ((BASE, files["base"]), (TRAINED, files["trained"])):
        alone = orjson.loads(run([path]).stdout)["overall"]
        assert report["by_policy"][model] == alone and alone["policies"] == 1


# --- the models × domains table ---------------------------------------------------------------------

def test_models_by_domains_markdown_marks_the_best_and_the_second(files):
    report = orjson.loads(run(["--by", "model", "--by", "domain"], input=both(files)).stdout)
    lines = run(["--by", "model", "--by", "domain", "--format", "markdown"],
                input=both(files)).stdout.split("\n\n")[0].splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert head[:4] == ["model", "bank pass@1%", "bank pass@8%", "bank 8/8%"]
    assert head[-3:] == ["all pass@1%", "all pass@8%", "all 8/8%"]
    cells = {row.split("|")[1].strip(): [c.strip() for c in row.strip("|").split("|")[1:]]
             for row in lines[2:]}
    for j, name in enumerate(head[1:]):
        domain, metric = name.split(" ")
        values = {}
        for model in (BASE, TRAINED):
            group = report["by_model"][model]
            group = group if domain == "all" else group["by_domain"][domain]
            values[model] = {"pass@1%": group["pass_at_1"], "pass@8%": group["pass_at_k"]["8"],
                             "8/8%": group["observed_all"]["fraction"]}[metric]
            assert cells[model][j].strip("*").removeprefix("<u>").removesuffix("</u>") == \
                pct(values[model])
        shown = {m: round(100 * v, 1) for m, v in values.items()}
        for model in (BASE, TRAINED):  # a 0.0 is never marked: no row is best at nothing
            best = shown[model] == max(shown.values())
            expected = pct(values[model]) if shown[model] == 0 else \
                f"**{pct(values[model])}**" if best else f"<u>{pct(values[model])}</u>"
            assert cells[model][j] == expected, (name, model)


def test_the_cross_groups_are_the_groups_of_the_filtered_attempts(files, tmp_path):
    """by_model[m].by_domain[d] is exactly the overall of m's attempts in domain d."""
    report = orjson.loads(run(["--by", "model", "--by", "domain", "--k", "1,8"],
                              input=both(files)).stdout)
    for model, records in ((BASE, files["records"][0]), (TRAINED, files["records"][1])):
        for domain in DOMAINS:
            alone = [r for r in records if r["domain"] == domain]
            path = write(tmp_path / "alone.jsonl", alone)
            expected = orjson.loads(run(["--k", "1,8", path]).stdout)["overall"]
            assert report["by_model"][model]["by_domain"][domain] == expected


# --- compare: cost, clusters, what is paired --------------------------------------------------------

def test_compare_reports_cost_per_success_and_per_reliable_task(files):
    report = orjson.loads(run(["compare", files["base"], files["trained"]]).stdout)
    cost = report["cost"]
    for side, records in (("base", files["records"][0]), ("new", files["records"][1])):
        total = sum(r["cost_usd"] for r in records)
        wins = Counter(r["task_id"] for r in records if r["reward"])
        reliable = sum(1 for t, c in wins.items() if c == 8)
        assert cost[side]["per_success_usd"] == pytest.approx(total / sum(wins.values()), rel=1e-12)
        assert cost[side]["per_reliable_task_usd"] == pytest.approx(total / reliable, rel=1e-12)
    for key in ("per_success", "per_reliable_task"):
        b, n = cost["base"][f"{key}_usd"], cost["new"][f"{key}_usd"]
        assert cost[f"{key}_change_pct"] == pytest.approx(100 * (n - b) / b, rel=1e-12)
    table = run(["compare", "--format", "markdown", files["base"], files["trained"]]).stdout
    costs = table.split("\n\n")[1].splitlines()
    assert costs[0] == ("| group | $/success base | new | change [95%] | $/reliable base | new | "
                        "change [95%] |")
    ci_s, ci_r = cost["per_success_change_ci95"], cost["per_reliable_task_change_ci95"]
    assert costs[2] == (f"| overall | {usd(cost['base']['per_success_usd'])} | "
                        f"{usd(cost['new']['per_success_usd'])} | "
                        f"{cost['per_success_change_pct']:+.1f}% [{ci_s[0]:+.1f}, {ci_s[1]:+.1f}] | "
                        f"{usd(cost['base']['per_reliable_task_usd'])} | "
                        f"{usd(cost['new']['per_reliable_task_usd'])} | "
                        f"{cost['per_reliable_task_change_pct']:+.1f}% [{ci_r[0]:+.1f}, {ci_r[1]:+.1f}] |")


def test_compare_cluster_is_cr1_over_the_clusters(files):
    plain = orjson.loads(run(["compare", files["base"], files["trained"]]).stdout)
    clustered = orjson.loads(run(["compare", "--cluster", "domain", files["base"],
                                  files["trained"]]).stdout)
    assert clustered["clusters"] == 4 and plain["clusters"] is None
    assert clustered["pass_at_1"]["delta"] == plain["pass_at_1"]["delta"]
    assert clustered["pass_at_1"]["se"] != plain["pass_at_1"]["se"]


def test_cluster_is_refused_under_the_benchmark_estimand(files):
    for command in ([], ["compare"]):
        result = run([*command, "--estimand", "benchmark", "--cluster", "domain", files["base"],
                      *([files["trained"]] if command else [])])
        assert result.exit_code == 2 and "--cluster describes how the tasks were drawn" in result.stderr


def test_compare_says_which_tasks_it_pairs_and_a_domain_must_agree(files, tmp_path):
    trained = files["records"][1]
    fewer = write(tmp_path / "fewer.jsonl", [r for r in trained if r["task_id"] != "bank-task-0"])
    result = run(["compare", files["base"], fewer])
    assert result.exit_code == 0 and orjson.loads(result.stdout)["only_base"] == 1
    assert ("evalstats compare: 1 only in BASE (first: 'bank-task-0'); the comparison pairs the 19 "
            "task(s) both have") in result.stderr
    moved = write(tmp_path / "moved.jsonl", [{**r, "domain": "retail"} if r["task_id"] == "bank-task-1"
                                             else r for r in trained])
    result = run(["compare", "--by", "domain", files["base"], moved])
    assert result.exit_code == 4
    assert result.stderr == ("evalstats: task 'bank-task-1' has domain 'bank' in BASE and 'retail' in "
                             "NEW; a task's domain is one value: fix the attempts, or pass --tasks "
                             "FILE to take it from the task records\n")


# --- the per-task tally -----------------------------------------------------------------------------

def test_tally_counts_successes_and_the_checks_that_failed(files):
    plain = [orjson.loads(line) for line in run(["tally", files["base"]]).stdout.splitlines()]
    assert len(plain) == 20 and all(r["failed_checks"] is None for r in plain)
    result = run(["tally", "--graded", files["graded"], "--top", "2", files["base"], files["trained"]])
    records = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 40
    graded = files["records"][2]
    for r in records:
        mine = [e for e in graded if e["task_id"] == r["task_id"] and e["policy"]["model"] == r["model"]]
        assert (r["successes"], r["n"]) == (sum(e["reward"] for e in mine), len(mine))
        failed = Counter(c["id"] for e in mine for c in e["checks"] if not c["passed"])
        expected = sorted(failed.items(), key=lambda kv: (-kv[1], kv[0]))[:2]
        assert [(c["id"], c["count"]) for c in r["failed_checks"]] == expected
    table = run(["tally", "--format", "table", "--graded", files["graded"], files["base"]]).stdout
    assert table.splitlines()[0].split()[:4] == ["policy", "task", "domain", "successes/n"]


# --- the report page --------------------------------------------------------------------------------

class _Tables(html.parser.HTMLParser):
    """The page's tables as lists of rows of cell texts, its images and its JSON blocks."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self.data, self._json = [], [], {}, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.tables[-1][-1].append("")
        elif tag == "img":
            self.images.append(attrs["src"])
        elif tag == "script" and attrs.get("type") == "application/json":
            self._json = attrs["id"]

    def handle_endtag(self, tag):
        if tag == "script":
            self._json = None

    def handle_data(self, data):
        if self._json:
            self.data[self._json] = orjson.loads(data)
        elif self.tables and self.tables[-1] and self.tables[-1][-1]:
            self.tables[-1][-1][-1] += data


@pytest.fixture(scope="module")
def page(files):
    out = files["tmp"] / "report.html"
    result = run(["report", "--compare", files["base"], files["trained"], "--graded",
                  files["graded"], "-o", str(out)])
    assert result.exit_code == 0, result.output
    parsed = _Tables()
    parsed.feed(out.read_text())
    return out, parsed


def test_the_report_carries_the_json_outputs_and_shows_their_numbers(files, page):
    _, parsed = page
    summary = orjson.loads(run(["--by", "policy", "--by", "domain", files["base"],
                                files["trained"]]).stdout)
    assert parsed.data["metrics"] == summary
    compared = orjson.loads(run(["compare", "--by", "domain", files["base"], files["trained"]]).stdout)
    assert parsed.data["compare-0"] == compared
    tally = [orjson.loads(line) for line in run(["tally", "--graded", files["graded"], files["base"],
                                                 files["trained"]]).stdout.splitlines()]
    assert parsed.data["tally"] == tally
    cross = parsed.tables[0]
    assert cross[0][:2] == ["policy", "bank pass@1%"]
    # the checkpoint is shown as its run and step, the JSON keeps the model as recorded
    assert [r[0] for r in cross[1:]] == [BASE, "grpo step 50"]
    assert cross[2][1] == pct(summary["by_policy"][TRAINED]["by_domain"]["bank"]["pass_at_1"])
    assert f"grpo step 50: {TRAINED}" in page[0].read_text()
    costs = next(t for t in parsed.tables if t[0][1] == "$/success base")
    ci = compared["cost"]["per_success_change_ci95"]
    assert costs[1][3] == (f"{compared['cost']['per_success_change_pct']:+.1f}% "
                           f"[{ci[0]:+.1f}, {ci[1]:+.1f}]")
    assert len(parsed.images) == 6 and all(s.startswith("data:image/png;base64,") for s in parsed.images)


def test_the_report_as_markdown(files, tmp_path):
    out = tmp_path / "report.md"
    assert run(["report", "--format", "markdown", "-o", str(out), files["base"],
                files["trained"]]).exit_code == 0
    text = out.read_text()
    assert text.count("](data:image/png;base64,") == 5  # no comparison asked for
    assert "| policy | bank pass@1% |" in text and "```json" in text


CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser",
                                                         "google-chrome")) if p), None)
CHECK = """<script>addEventListener('load', () => {
  const images = [...document.images];
  document.body.dataset.images = images.filter(i => i.complete && i.naturalWidth > 0).length
    + '/' + images.length;
  document.body.dataset.tables = [...document.querySelectorAll('table')]
    .filter(t => t.getBoundingClientRect().height > 20 && t.rows.length > 1).length
    + '/' + document.querySelectorAll('table').length;
});</script></body>"""


def browser(*args: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                           "--no-first-run", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={home}", *args], capture_output=True, text=True,
                          timeout=300, env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
                          check=False)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on this machine (CI installs "
                    "Debian's chromium: .ci/run); apt-get install chromium to run it here")
def test_the_report_opens_in_a_browser_with_every_image_and_table(page, tmp_path):
    path, parsed = page
    checked = tmp_path / "checked.html"
    checked.write_text(path.read_text().replace("</body>", CHECK))
    dom = browser("--virtual-time-budget=10000", "--dump-dom", checked.as_uri(),
                  home=tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom.stdout).group(0)
    n, tables = len(parsed.images), len(parsed.tables)
    assert f'data-images="{n}/{n}"' in body and f'data-tables="{tables}/{tables}"' in body, body
    shot = tmp_path / "report.png"
    browser(f"--screenshot={shot}", "--window-size=1280,2400", "--virtual-time-budget=10000",
            path.as_uri(), home=tmp_path / "profile2")
    assert shot.read_bytes()[:4] == b"\x89PNG"


def test_report_without_attempts_and_arrow_usage(files, tmp_path):
    result = run(["report", "-o", str(tmp_path / "r.html"), write(tmp_path / "none.jsonl", [])])
    assert result.exit_code == 2 and "no attempt records" in result.stderr
    png = tmp_path / "s.png"
    ok = run(["--plot", str(png), "--arrow", f"{BASE}={TRAINED}", files["base"], files["trained"]])
    assert ok.exit_code == 0 and png.read_bytes()[:4] == b"\x89PNG"
    bad = run(["--plot", str(png), "--arrow", BASE, files["base"]])
    assert bad.exit_code == 2 and "expected BASE=NEW" in bad.stderr


# --- hostile names ------------------------------------------------------------------------------

PWN = "document.documentElement.dataset.pwned"
HOSTILE_TASKS = ["t0<!--<script>", f"t1</script><script>{PWN}='script'</script>",
                 f"t2<img src=x onerror=\"{PWN}='img'\">", f"[t3](javascript:{PWN}='link')",
                 "t4\nline break | cell", "t5 ``` fence $\\frac$ & &amp; *em*"]
HOSTILE_DOMAIN = f"d<!--<script><svg onload=\"{PWN}='svg'\">"
HOSTILE_MODELS = {BASE: "base<!--<script>", TRAINED: f"m</title><img src=x onerror=\"{PWN}='m'\">"}


@pytest.fixture(scope="module")
def hostile(files):
    """The study's records with every task, domain and policy name replaced by markup."""
    tasks = {}
    for r in files["records"][0]:
        tasks.setdefault(r["task_id"], HOSTILE_TASKS[len(tasks) % len(HOSTILE_TASKS)] + f" #{len(tasks)}")

    def rename(r):
        out = {**r, "task_id": tasks[r["task_id"]], "domain": HOSTILE_DOMAIN if
               r["domain"] == "bank" else r["domain"]}
        if "model" in r:
            out["model"] = HOSTILE_MODELS[r["model"]]
        else:
            out["policy"] = {**r["policy"], "model": HOSTILE_MODELS[r["policy"]["model"]]}
        return out

    tmp = files["tmp"]
    base, trained, graded = ([rename(r) for r in rs] for rs in files["records"])
    return {"base": write(tmp / "hb.jsonl", base), "trained": write(tmp / "ht.jsonl", trained),
            "graded": write(tmp / "hg.jsonl", graded)}


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on this machine (CI installs "
                    "Debian's chromium: .ci/run); apt-get install chromium to run it here")
def test_hostile_names_are_shown_not_run_and_the_json_parses_back(hostile, tmp_path):
    """A name holding `<!--<script>` swallowed the page's JSON and footer (the script element
    never ended); `<img onerror>` and `javascript:` are names, not markup. In a real browser:
    nothing runs, every table renders, every JSON block parses to what summary/compare print."""
    out = tmp_path / "report.html"
    result = run(["report", "--compare", hostile["base"], hostile["trained"], "--graded",
                  hostile["graded"], "-o", str(out)])
    assert result.exit_code == 0, result.output
    check = CHECK.replace("});</script></body>", """
  document.body.dataset.json = ['metrics', 'compare-0', 'tally'].map(id => {
    try { JSON.parse(document.getElementById(id).textContent); return 'ok'; }
    catch (e) { return 'bad'; } }).join(',');
  document.body.dataset.footer = [...document.querySelectorAll('p.facts')].some(
    p => p.textContent.startsWith('endstate ')) ? 'yes' : 'no';
});</script></body>""")
    checked = tmp_path / "checked.html"
    checked.write_text(out.read_text().replace("</body>", check))
    dom = browser("--virtual-time-budget=10000", "--dump-dom", checked.as_uri(),
                  home=tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "data-pwned" not in dom.stdout
    body = re.search(r"<body[^>]*>", dom.stdout).group(0)
    parsed = _Tables()
    parsed.feed(out.read_text())
    n, tables = len(parsed.images), len(parsed.tables)
    assert f'data-images="{n}/{n}"' in body and f'data-tables="{tables}/{tables}"' in body, body
    assert 'data-json="ok,ok,ok"' in body and 'data-footer="yes"' in body, body
    summary = orjson.loads(run(["--by", "policy", "--by", "domain", hostile["base"],
                                hostile["trained"]]).stdout)
    assert parsed.data["metrics"] == summary
    assert HOSTILE_DOMAIN in summary["by_policy"][HOSTILE_MODELS[BASE]]["by_domain"]
    shown = [cell for table in parsed.tables for row in table for cell in row]
    assert any(cell.startswith("t0<!--<script> #") for cell in shown)  # shown as text


def test_hostile_names_in_markdown_are_text(hostile, tmp_path):
    """The Markdown page copied raw `<script>`, `<img onerror>`, `javascript:` links and line
    breaks. Rendered by a CommonMark parser (markdown-it, as GitHub's is), no name becomes
    markup, every table row stays one row, and the JSON fences parse back."""
    from markdown_it import MarkdownIt

    out = tmp_path / "report.md"
    assert run(["report", "--format", "markdown", "--compare", hostile["base"],
                hostile["trained"], "--graded", hostile["graded"], "-o", str(out)]).exit_code == 0
    text = out.read_text()
    rendered = MarkdownIt("commonmark").enable("table").render(text)
    for markup in ("<script", "<img src=x", "<svg", 'href="javascript', "<a "):
        assert markup not in rendered, markup
    assert "&lt;!--&lt;script&gt;" in rendered and "t4\\nline break | cell" in rendered
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    fences = [t.content for t in tokens if t.type == "fence"]
    assert len(fences) == 3 and orjson.loads(fences[0])["overall"]["tasks"] == 20
    rows = [t for t in tokens if t.type == "tr_open"]
    tally = [line for line in text.splitlines() if line.startswith("| ") and " #" in line]
    assert len(tally) == 40 and len(rows) >= 40  # one line, one row per (policy, task)


# --- the page a newcomer sees --------------------------------------------------------------------

def sections(path: Path) -> list[str]:
    return re.findall(r"<h2>(.*?)</h2>", path.read_text())


def test_the_report_names_policies_and_leaves_out_sections_without_data(files, tmp_path):
    """The demo's page named the trained policy by its checkpoint's path, drew an empty cost
    chart ("no cost data") and a heat map of all policies pooled. --label names a policy (its
    model or its attempt file); a section without data is not there."""
    base, trained = (write(tmp_path / f"{name}.jsonl",
                           [{k: v for k, v in r.items() if k not in ("cost_usd", "usage")}
                            for r in records])
                     for name, records in (("base", files["records"][0]),
                                           ("trained", files["records"][1])))
    out = tmp_path / "r.html"
    result = run(["report", "--compare", base, trained, "--label", f"{trained}=trained",
                  "--label", f"{BASE}=base", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert sections(out) == ["policy × domain", "Summary", "Comparison: base → trained",
                             "By domain, per policy", "Per-task outcomes", "Difficulty posteriors"]
    text = out.read_text()
    assert "no cost data" not in text and f"trained: {TRAINED}" in text
    bad = run(["report", "--label", "nowhere=x", "-o", str(out), files["base"]])
    assert bad.exit_code == 2 and bad.stderr.startswith("--label nowhere=x: no policy's model is")
    no_domain = write(tmp_path / "nd.jsonl", [{k: v for k, v in r.items() if k != "domain"}
                                              for r in files["records"][0]])
    assert run(["report", "-o", str(out), no_domain]).exit_code == 0
    assert sections(out) == ["Summary", "Cost vs pass@1", "Per-task outcomes",
                             "Difficulty posteriors"]


def test_the_outcome_figure_draws_the_named_tasks_split_by_the_checks_that_failed(files):
    """Figure 2 drew the first 60 tasks, could not be pointed at one, and had no outcome
    categories. --task picks; each bar is successes then the failed attempts by the checks
    that failed in them, counted here from the graded episodes by hand."""
    from endstate.evalstats import figures as F

    records = [orjson.loads(line) for line in run(["tally", "--graded", files["graded"],
                                                   files["base"], files["trained"]]).stdout.splitlines()]
    fig = F.outcomes_figure(records, ["travel-task-4"])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        f"travel-task-4 · {F.shorts([BASE, TRAINED], 30)[p]}" for p in (BASE, TRAINED)]
    for row, model in enumerate((BASE, TRAINED)):
        mine = [e for e in files["records"][2]
                if e["task_id"] == "travel-task-4" and e["policy"]["model"] == model]
        kinds = Counter(" + ".join(sorted(c["id"] for c in e["checks"] if not c["passed"]))
                        for e in mine if not e["reward"])
        expected = [("success", sum(e["reward"] for e in mine)),
                    *sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))]
        bars = sorted((p for p in ax.patches if abs(p.get_y() + p.get_height() / 2 - row) < 1e-9),
                      key=lambda p: p.get_x())
        widths = [(p.get_label(), round(p.get_width() * 8)) for p in bars]
        legend = {kind: colour for kind, colour in zip(
            [t.get_text() for t in fig.legends[0].get_texts()],
            [h.get_facecolor() for h in fig.legends[0].legend_handles])}
        assert [w for _, w in widths] == [n for _, n in expected if n]
        assert all(tuple(p.get_facecolor()) == tuple(legend[kind]) for p, (kind, n) in
                   zip(bars, [e for e in expected if e[1]]))
    result = run(["report", "--task", "nope", "-o", "/dev/null", files["base"]])
    assert result.exit_code == 2 and result.stderr.startswith("--task nope: no attempt of it")


def test_the_frontier_is_per_policy_in_summary_plot_as_in_the_report(files, tmp_path):
    """summary --plot drew one point per model, so one model prompted two ways was one point;
    the report drew one per policy. Both draw per policy now."""
    from endstate.evalstats import figures as F

    base = files["records"][0]
    other = [{**r, "prompting": {**PROMPTING, "few_shot": False},
              "cost_usd": 2 * r["cost_usd"]} for r in base]
    path = write(tmp_path / "two.jsonl", [*base, *other])
    report = orjson.loads(run(["--by", "policy", path]).stdout)
    points = F.priced_points(report["by_policy"])
    assert sorted(points) == [f"{BASE} [few_shot=False]", f"{BASE} [few_shot=True]"]
    png = tmp_path / "f.png"
    assert run(["--plot", str(png), path]).exit_code == 0 and png.read_bytes()[:4] == b"\x89PNG"
