"""The static policy as one visitor with rule objects (jg_mcp.policy.check): the walk shows each node it judges once
to every rule, in source order; each rule is one concern that shares the scan's state only through the context."""

from __future__ import annotations

import ast

import pytest

import jg_mcp.policy.check as policy
from jg_mcp.policy.context import Context, Rule

FORBIDDEN = ["torch.matmul"]


class Seen(Rule):
    """A probe rule: records every name, call and constant the visitor shows it."""

    seen: list[tuple[str, int]] = []

    def visit_Name(self, node: ast.Name) -> None:
        Seen.seen.append((node.id, node.lineno))

    def visit_Call(self, node: ast.Call) -> None:
        Seen.seen.append(("call", node.lineno))

    def visit_Constant(self, node: ast.Constant) -> None:
        Seen.seen.append((repr(node.value), node.lineno))


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    rules = policy.rules
    monkeypatch.setattr(policy, "rules", lambda ctx, scan: [*rules(ctx, scan), Seen(ctx)])
    Seen.seen = []
    return Seen.seen


def test_each_judged_node_reaches_a_rule_once_in_source_order(probe):
    """One walk: a name is shown once, parents before children; the parts of a folded constant string and the body of
    the main guard are not shown (their syntax is still checked), and the code in a string annotation is."""
    lines = ["import torch", "def f(x: 'torch.Tensor'):", "    return g(x, 'a' + 'b')", 'if __name__ == "__main__":']
    src = "\n".join([*lines, "    h(1)"])
    assert policy.static_check(src, FORBIDDEN) == []
    assert probe == [
        ("torch", 2),
        ("'torch.Tensor'", 2),
        ("call", 3),
        ("g", 3),
        ("x", 3),
        ("__name__", 4),
        ("'__main__'", 4),
    ]


def test_a_rule_returning_false_keeps_children_unvisited_but_their_syntax_checked(monkeypatch):
    """The visitor skips the children's rules, never the syntax allow-list."""

    class Stop(Rule):
        def visit_Expr(self, node: ast.Expr) -> bool:
            return False

    rules = policy.rules
    monkeypatch.setattr(policy, "rules", lambda ctx, scan: [Stop(ctx), *rules(ctx, scan)])
    found = policy.static_check("exec('x')\n[x async for x in y]\n", FORBIDDEN)
    assert [f.detail.split(":")[0] for f in found] == ["line 2"]


def test_each_rule_is_one_concern_on_the_one_context():
    """Rules share state only through the context the scan owns (none inherits from another rule), and every
    `visit_` method names a node type: a misspelt one would never be called."""
    ctx = Context(forbidden=FORBIDDEN, allowed=set())
    rules = policy.rules(ctx, lambda tree: None)
    assert len({type(r) for r in rules}) == len(rules)
    for rule in rules:
        assert rule.ctx is ctx
        assert type(rule).__bases__ == (Rule,), type(rule).__name__
        for name in dir(rule):
            if name.startswith("visit_"):
                assert isinstance(getattr(ast, name.removeprefix("visit_"), None), type), f"{rule}.{name}"
