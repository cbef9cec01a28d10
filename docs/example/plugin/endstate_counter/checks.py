"""The `total` check kind: the sum of a column over a table equals `expect`.

    {"kind": "total", "table": "counters", "column": "value", "expect": 10}
"""

from endstate.api import CheckContext, TaskError


def total(check: dict, ctx: CheckContext) -> tuple[bool, str]:
    table = ctx.domain.tables.get(check["table"])
    if table is None or check["column"] not in table.columns:
        raise TaskError(f"no column {check['table']}.{check['column']}: name one of the domain's")
    (got,) = ctx.conn.execute(f'SELECT total("{check["column"]}") FROM "{table.name}"').fetchone()
    what = f"total of {table.name}.{check['column']}"
    return got == check["expect"], f"{what}: expected {check['expect']}, got {got:g}"
