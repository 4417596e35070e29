"""Call-site recovery, construct by construct: source, observed child events, expected lines."""

from __future__ import annotations

import ast
import textwrap

from brrr_trace.analyzers.alignment import align
from brrr_trace.analyzers.source import find_body, observe


def lines_of(source: str, events: list[tuple[str, bool]], tmp_path, function: str = "f") -> list:
    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent(source))
    tree = ast.parse(path.read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    def_line = min([node.lineno] + [d.lineno for d in node.decorator_list])
    body = find_body(str(path), path.stat().st_mtime_ns, def_line, function)
    assert body is not None
    return list(align(body, tuple(observe(name, frame) for name, frame in events)))


OP, FRAME = False, True


def test_operators_in_evaluation_order(tmp_path) -> None:
    src = """
    def f(a, b, y):
        c = a @ b
        z = y * 2 + 1
        w = -z
        m = z > 0
        return c, w, m
    """
    events = [
        ("aten::matmul", OP),
        ("aten::mul", OP),
        ("aten::add", OP),
        ("aten::neg", OP),
        ("aten::gt", OP),
    ]
    assert lines_of(src, events, tmp_path) == [3, 4, 4, 5, 6]


def test_method_and_function_calls_by_name(tmp_path) -> None:
    src = """
    def f(x):
        y = x.cos()
        z = torch.relu(y)
        return F.softmax(z, -1)
    """
    events = [
        ("<built-in method cos of Tensor object at 0x7f>", FRAME),
        ("<built-in method relu of type object at 0x7f>", FRAME),
        ("torch/nn/functional.py(2100): softmax", FRAME),
    ]
    assert lines_of(src, events, tmp_path) == [3, 4, 5]


def test_subscripts_and_augmented_assignment(tmp_path) -> None:
    src = """
    def f(x, v):
        y = x[0]
        x[1] = v
        x += 1
    """
    events = [("aten::select", OP), ("aten::select", OP), ("aten::copy_", OP), ("aten::add_", OP)]
    assert lines_of(src, events, tmp_path) == [3, 4, 4, 5]


def test_modules_loops_and_dataloader(tmp_path) -> None:
    src = """
    def f(self, loader):
        for batch in loader:
            out = self.fc(batch)
            loss = out.sum()
        self.opt.zero_grad()
    """
    loop = [
        ("torch/utils/data/dataloader.py(700): __next__", FRAME),
        ("nn.Module: Linear_0", FRAME),
        ("<built-in method sum of Tensor object at 0x1>", FRAME),
    ]
    events = loop * 3 + [("torch/optim/optimizer.py(900): zero_grad", FRAME)]
    assert lines_of(src, events, tmp_path) == [3, 4, 5] * 3 + [6]


def test_multiline_statements_decorators_and_comprehensions(tmp_path) -> None:
    src = """
    @torch.no_grad()
    def f(xs, a,
          b):
        total = torch.cat(
            [x * 2 for x in xs]
        )
        layers = [Linear(4, 4) for _ in range(3)]
        return total
    """
    events = [
        ("<listcomp>", FRAME),  # Python <= 3.11 runs the comprehension in a frame of its own
        ("<built-in method cat of type object at 0x1>", FRAME),
        ("torch/nn/modules/linear.py(96): __init__", FRAME),  # 3.12: inlined, constructors
        ("torch/nn/modules/linear.py(96): __init__", FRAME),
        ("torch/nn/modules/linear.py(96): __init__", FRAME),
    ]
    assert lines_of(src, events, tmp_path) == [5, 5, 8, 8, 8]


def test_nested_functions_and_lambdas_run_in_their_own_frames(tmp_path) -> None:
    src = """
    def f(x):
        def g(y):
            return y * 2
        h = lambda y: y + 1
        return g(x) + h(x)
    """
    events = [("m.py(3): g", FRAME), ("m.py(5): <lambda>", FRAME), ("aten::add", OP)]
    assert lines_of(src, events, tmp_path) == [6, 6, 6]


def test_unknown_events_between_agreeing_neighbours_take_their_line(tmp_path) -> None:
    src = """
    def f(a, b):
        for _ in range(2):
            c = a @ b
        d = c.sin()
    """
    events = [("aten::matmul", OP), ("aten::something_internal", OP), ("aten::matmul", OP)]
    # The loop repeats line 4; the unknown op between two of its matmuls is on line 4 too.
    assert lines_of(src, events, tmp_path) == [4, 4, 4]


def test_anchors_from_the_recorder_place_the_events_after_them(tmp_path) -> None:
    src = """
    def f(x):
        y = x * 2
        z = x * 3
        w = x * 4
        v = x * 5
    """
    events = [("aten::mul", OP), ("aten::mul", OP), ("aten::mul", OP)]
    assert lines_of(src, events, tmp_path) == [3, 4, 5]
    path = tmp_path / "m.py"
    body = find_body(str(path), path.stat().st_mtime_ns, 2, "f")
    seen = tuple(observe(n, fr) for n, fr in events)
    # An exact anchor on the second event (line 5) moves the walk: the third lands on line 6.
    assert align(body, seen, (None, 5, None)) == (3, 5, 6)


def test_a_loop_over_a_module_list_then_the_head_and_the_loss(tmp_path) -> None:
    """A greedy walk sends the second block to `ln_f` and the third to `head`; the global
    alignment, with the classes `__init__` assigns, keeps every block on the loop's line."""
    src = """
    class GPT(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for _ in range(n)])
            self.ln_f = nn.LayerNorm(8)
            self.head = nn.Linear(8, 8)

        def forward(self, x, y):
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits, y)
    """
    events = [
        ("nn.Module: Block_0", FRAME),
        ("nn.Module: Block_1", FRAME),
        ("nn.Module: Block_2", FRAME),
        ("nn.Module: LayerNorm_0", FRAME),
        ("nn.Module: Linear_0", FRAME),
        ("torch/nn/functional.py(3400): cross_entropy", FRAME),
    ]
    assert lines_of(src, events, tmp_path, "forward") == [11, 11, 11, 12, 12, 13]


def test_modules_of_unknown_class_still_fill_the_loop_before_what_follows(tmp_path) -> None:
    src = """
    def f(layers, head, x):
        for layer in layers:
            x = layer(x)
        return head(x)
    """
    events = [("nn.Module: A_0", FRAME)] * 3 + [("nn.Module: B_0", FRAME)]
    assert lines_of(src, events, tmp_path) == [4, 4, 4, 5]


def test_a_branch_not_taken_and_an_early_return_are_skipped(tmp_path) -> None:
    src = """
    def f(x, flag):
        if flag:
            x = x.cos()
        y = x.sin()
        if y.sum() > 0:
            return y.exp()
        return y.tanh()
    """
    events = [
        ("<built-in method sin of Tensor object at 0x1>", FRAME),
        ("<built-in method sum of Tensor object at 0x1>", FRAME),
        ("aten::gt", OP),
        ("aten::is_nonzero", OP),
        ("<built-in method exp of Tensor object at 0x1>", FRAME),
    ]
    assert lines_of(src, events, tmp_path) == [5, 6, 6, 6, 7]


def test_a_wrapper_frame_is_matched_by_the_function_it_runs(tmp_path) -> None:
    """`F.max_pool2d` runs as `torch/_jit_internal.py fn`, `clip_grad_norm_` under a decorator's
    `_no_grad_wrapper`: the names of the frames they run first say what was called."""
    src = """
    def f(x, model):
        x = F.max_pool2d(x, 2)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    """
    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent(src))
    body = find_body(str(path), path.stat().st_mtime_ns, 2, "f")
    assert body is not None
    events = (
        observe("torch/_jit_internal.py(620): fn", True, frozenset({"_max_pool2d"})),
        observe(
            "torch/nn/utils/clip_grad.py(30): _no_grad_wrapper",
            True,
            frozenset({"__enter__", "clip_grad_norm_"}),
        ),
        observe("torch/optim/optimizer.py(500): wrapper", True, frozenset({"step"})),
    )
    assert align(body, events) == (3, 4, 5)


def test_the_statement_walk_meets_statements_as_ast_walk_does() -> None:
    # Functions named alike are told apart by their walk order (_index): defs under except
    # handlers and match cases sit one level deeper than a def in an if's body.
    from brrr_trace.analyzers.source import _walk_statements

    src = """
    import os
    def f(): pass
    try:
        def f(): pass
    except ValueError:
        def f(): pass
    else:
        class C:
            x = [lambda: 1 for _ in range(2)]
            def f(self): pass
    finally:
        pass
    match os.sep:
        case "/":
            def f(): pass
        case _:
            if True:
                def f(): pass
    with open(os.devnull) as handle:
        while False:
            def f(): pass
    """
    tree = ast.parse(textwrap.dedent(src))
    blocks = (ast.stmt, ast.excepthandler, ast.match_case)
    expected = [n for n in ast.walk(tree) if n is tree or isinstance(n, blocks)]
    assert list(_walk_statements(tree)) == expected
    assert [n.lineno for n in _walk_statements(tree) if isinstance(n, ast.FunctionDef)] == [
        3, 5, 7, 11, 16, 22, 19,
    ]  # fmt: skip
