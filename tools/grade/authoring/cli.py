"""`grade import tau2` and `grade new-domain`: commands that write a domain folder to start from."""

from __future__ import annotations

from pathlib import Path

import click

from endstate.core.cli.command import CONTEXT_SETTINGS, common_options
from endstate.grade.authoring.scaffold import new_domain as write_scaffold
from endstate.grade.authoring.scaffold import next_steps
from endstate.grade.authoring.tau2_model import read_data_model
from endstate.grade.authoring.tau2_source import read_source
from endstate.grade.authoring.tau2_toolkit import read_toolkit
from endstate.grade.authoring.tau2_write import report, write_domain


@click.group("import", context_settings=CONTEXT_SETTINGS)
def import_group():
    """Import a task suite written for another harness as an endstate domain folder and task file.

    \b
    Example:
      grade import tau2 tau2-bench/data/tau2/domains/airline --out mine/airline
    """


@import_group.command("tau2", context_settings=CONTEXT_SETTINGS)
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The domain folder to write; its name is the domain's name.")
@click.option("--force", is_flag=True,
              help="Write into --out although it holds files (existing tools.py and checks.py "
                   "are kept).")
@click.option("--data-model", "data_model", type=click.Path(dir_okay=False, path_type=Path),
              help="tau2's data_model.py for this domain, read as text (never run): every field "
                   "it declares gets a typed column, also those no record holds yet.")
@click.option("--tasks", "tasks_file", type=click.Path(dir_okay=False, path_type=Path),
              help="The task file, when it is not FOLDER/tasks.json (nor the one tasks*.json).")
@click.option("--policy", "policy_file", type=click.Path(dir_okay=False, path_type=Path),
              help="The agent's policy, when it is not FOLDER/policy.md (nor main_policy.md).")
@click.option("--tools-from", "tools_from", metavar="PATH[:CLASS]",
              help="tau2's tools.py of the domain, read without running it: tools.py gets a stub "
                   "for every tool its toolkit CLASS declares (needed when the file has several), "
                   "with tau2's signature, docstring and read/write mark.")
@common_options(quiet=True)
def tau2(folder, out_dir, force, data_model, tasks_file, policy_file, tools_from, quiet):
    """Import a tau2-bench domain folder (db.json or db.toml, tasks.json, policy.md, optional
    split_tasks.json): the database as tables seeded from a copy of it, the policy, and each task
    with its gold calls, its checks (from the reward basis), its user and its split. Tools are
    code: tools.py gets a typed stub per tool, to be written by hand.

    \b
    Example:
      grade import tau2 tau2-bench/data/tau2/domains/airline --out mine/airline \\
          --data-model tau2-bench/src/tau2/domains/airline/data_model.py \\
          --tools-from tau2-bench/src/tau2/domains/airline/tools.py
      grade validate --domains mine/airline mine/airline/tasks/airline.jsonl
    """
    model = read_data_model(data_model) if data_model else None
    toolkit = read_toolkit(tools_from) if tools_from else None
    written = write_domain(read_source(folder, tasks_file, policy_file), out_dir, force, model,
                           toolkit)
    for line in () if quiet else report(written, out_dir):
        click.echo(line, err=True)


@click.command("new-domain", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.option("--out", "out_dir", default=".", show_default=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="The folder to create the domain folder NAME in.")
@common_options(quiet=True)
def new_domain(name, out_dir, quiet):
    """Write a domain folder NAME that runs and validates as it is: schema.sql, seed.py, tools.py
    (a read and a write tool), policy.md and tasks/NAME.jsonl with two sound tasks.

    \b
    Example:
      grade new-domain shop --out domains_mine
      grade validate --domains domains_mine/shop domains_mine/shop/tasks/shop.jsonl
    """
    folder = write_scaffold(name, out_dir)
    for line in () if quiet else next_steps(folder, name):
        click.echo(line, err=True)
