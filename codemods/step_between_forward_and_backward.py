"""## What it does
Finds a backward call whose loss was computed, before an optimizer step, from a module's forward
pass that this step then changed: the critic's step between the critic loss's backward and the
actor loss's backward (actor-critic, SAC, DDPG), the discriminator's step between the
discriminator loss's backward and the generator loss's backward through the same `D(fake)`. The
first backward usually passes `retain_graph=True`, added to get past "Trying to backward through
the graph a second time".

It fires only on what the file proves: the loss derives, through assignments with one reaching
definition each, from a call of a module whose input carries a graph (a module's output, such as
an action from the policy or a generator's sample), or of a module that saves its own weights
on any input: one that feeds a parametrized layer's output into a weight-saving layer
(`nn.Sequential(nn.Linear(...), nn.ReLU(), nn.Linear(...))`, a class of this file whose
`forward` chains two such layers), such as a generator applied to noise; the step's optimizer is built from that
module's parameters (`critic_opt = Adam(critic.parameters())`; an optimizer whose parameters are
not visible gives no finding); the forward, the step and the backward run in this order in the
same pass. Also across the methods of a model class (`fixer/analysis/field_stale_walks.py`):
`forward()` stores its outputs in fields, `update()` steps and then calls a method whose loss reads
a field the stepped module computed before the step (the image-translation frameworks' layout);
the methods are followed in the order the class calls them, along the path where the `if`s that
guard them hold; reported without a fix. When an earlier backward without `retain_graph` already freed part of the graph, GF105
(`separate-backward-through-shared-graph`) reports that first.

## Why is this bad?
A module applied to an input that requires grad saves its weights for the backward pass (the
input's gradient needs them). `step()` updates the weights in place, so the backward that walks
the earlier forward raises `RuntimeError: one of the variables needed for gradient computation
has been modified by an inplace operation` (torch >= 1.5). Before torch 1.5 it ran silently and
mixed the two versions of the weights: outputs of the old weights, backward through the new ones.

## Example
```python
q_new = critic(torch.cat([state, actor(state)], 1))
actor_loss = -q_new.mean()
critic_opt.zero_grad(); critic_loss.backward(retain_graph=True); critic_opt.step()
actor_opt.zero_grad(); actor_loss.backward(); actor_opt.step()
```

## Use instead
Recompute, after the step, what the loss needs from the changed module (the assignments from
the module call to the loss), right before the backward:
```python
actor_opt.zero_grad()
q_new = critic(torch.cat([state, actor(state)], 1))
actor_loss = -q_new.mean()
actor_loss.backward(); actor_opt.step()
```
Only the assignments on the way from the changed module's call to the loss are run again, and
only when that is sound: plain assignments on their own lines, made of module calls, torch
functions and tensor methods (no sampling, no helper with effects), whose other inputs still
hold the same values at the backward. Otherwise the finding has no fix.

When the step between is premature, the fix deletes it instead: the same optimizer steps again
after this backward, in the same block, with no `zero_grad()` between the two steps (and nothing
but call-free statements between the early step and this backward), so the later step already
applies the gradients of both backward calls and the program means one update from both losses:
```python
loss1.backward(retain_graph=True)
optimizer.step()  # deleted
loss2.backward()
optimizer.step()
```
(`fixer/analysis/premature_steps.py`; `graphfix run --fix` builds the same edit from the run's
evidence.) A `zero_grad()` between the two steps means two updates: then only the recompute.

## Fix safety
Unsafe. The program raised; the fix makes the loss the one at the parameters after the step
(the canonical DCGAN order, and what SAC implementations compute): its value and its gradients
are those of the updated module, not of the weights the forward first used. A module with dropout
draws a new mask, one with batch norm updates its running statistics once more, and a name
recomputed here holds the new value for the code after it (a logged loss changes). An expert who
wants every loss of one parameter snapshot instead moves each backward before the steps that
change its graph, which also changes which gradients each step sees; the rule does not do that.
Deleting a premature step makes one update where the program took two: the first step applied
the first loss's gradients alone, the kept one applies the sum of both, as before.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.calls import backward_calls
from fixer.analysis.field_stale_walks import FieldStaleWalk, field_stale_walks
from fixer.analysis.premature_steps import premature_step
from fixer.analysis.scopes import Scope, scopes
from fixer.analysis.stale_forward import HELPER_STEP, StaleWalk, stale_walks
from fixer.analysis.undetached_fakes import undetached_fake_lines
from fixer.context import FileContext
from fixer.edits.statements import delete_statement
from fixer.rule import Applicability, Diagnostic, Edit, Rule


class StepBetweenForwardAndBackward(Rule):
    code = "GF108"
    name = "step-between-forward-and-backward"
    summary = "A backward walks a forward whose parameters an optimizer step changed in place since"
    fix_safety = "unsafe"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        if "step(" not in ctx.source:
            return
        reported = set()
        for scope in scopes(ctx):
            for walk in stale_walks(ctx, scope):
                if not _gan_cause(ctx, walk):
                    reported.add(id(walk.backward.node))
                    through_helper = walk.backward.kind == "call" or walk.step.kind == HELPER_STEP
                    yield self._report(ctx, walk, None if through_helper else _later_step(ctx, scope, walk))
        for walk in field_stale_walks(ctx):
            if id(walk.backward.node) not in reported:
                yield self._report_fields(ctx, walk)

    def _report_fields(self, ctx: FileContext, walk: FieldStaleWalk) -> Diagnostic:
        loss, forward, step = ctx.text(walk.backward.target), ctx.text(walk.forward), ctx.text(walk.step)
        return self.diagnostic(
            ctx,
            walk.backward.node,
            f"`{loss}` backpropagates through `{_short(forward)}` (line {walk.forward.lineno}, stored in a field), whose "
            f"parameters `{step}` (line {walk.step.lineno}) changed in place after that forward, before this method runs: "
            "the backward raises 'one of the variables needed for gradient computation has been modified by an "
            "inplace operation'; run the forward again after the step, or backpropagate before it",
            [],
            Applicability.UNSAFE,
        )

    def _report(self, ctx: FileContext, walk: StaleWalk, later: Optional[ast.stmt]) -> Diagnostic:
        target = walk.backward.target  # a helper's call: the arguments it backpropagates
        loss = ", ".join(map(ctx.text, target.elts)) if walk.backward.kind == "call" else ctx.text(target)
        forward, step = ctx.text(walk.forward), ctx.text(walk.step.node)
        if walk.step.kind == HELPER_STEP:
            step = f"{walk.step.owner}.step()` in `{_short(step)}"
        where = (
            f"`{loss}` backpropagates through `{_short(forward)}` (line {walk.forward.lineno}), whose parameters "
            f"`{step}` (line {walk.step.node.lineno}) changed in place after that forward: the backward raises "
            f"'one of the variables needed for gradient computation has been modified by an inplace operation'; "
        )
        if later is not None:
            return self.diagnostic(
                ctx,
                walk.backward.node,
                where + f"`{step}` steps again at line {later.lineno} with no zero_grad between, applying the gradients "
                "of both backward calls: delete the premature step",
                [delete_statement(ctx, ctx.statement_of(walk.step.node))],
                Applicability.UNSAFE,
                title=f"Delete the premature `{step}`",
            )
        edits, names = [], ""
        if walk.recompute:
            here = ctx.statement_of(walk.backward.node)
            indent = ctx.indent_of(here.lineno)
            copies = "".join(_copy(ctx, stmt, indent) for stmt in walk.recompute)
            start = ctx.line_start(here.lineno)
            edits = [Edit(start, start, copies)]
            names = ", ".join(f"`{ctx.text(stmt.targets[0])}`" for stmt in walk.recompute)
        advice = f"recompute {names} after the step" if names else "recompute it after the step"
        if walk.backward.kind == "call" or walk.step.kind == HELPER_STEP:
            advice = "backpropagate it before that step (the updates in the other order), or recompute it after the step"
        return self.diagnostic(
            ctx,
            walk.backward.node,
            where + advice,
            edits,
            Applicability.UNSAFE,
            title=f"Recompute {names} after the step" if names else "Recompute the forward after the step",
        )


def _later_step(ctx: FileContext, scope: Scope, walk: StaleWalk) -> Optional[ast.stmt]:
    earlier = [ctx.statement_of(b.node) for b in backward_calls(ctx, scope) if b.node is not walk.backward.node]
    return premature_step(ctx, ctx.statement_of(walk.step.node), ctx.statement_of(walk.backward.node), earlier)


def _gan_cause(ctx: FileContext, walk: StaleWalk) -> bool:
    """GF103 reports the cause between the forward and the backward: a discriminator step on
    an undetached fake, whose fix also ends this walk."""
    lines = undetached_fake_lines(ctx)
    return any(walk.forward.lineno <= line <= walk.backward.node.lineno for line in lines)


def _copy(ctx: FileContext, stmt, indent: str) -> str:
    """The statement's lines, its first line re-indented to ``indent`` (a multi-line statement is
    only copied at its own indentation)."""
    start, end = ctx.line_start(stmt.lineno), ctx.line_end(stmt.end_lineno)
    text = ctx.source[start:end]
    text = indent + text[len(ctx.indent_of(stmt.lineno)) :]
    code_end = ctx.offset(stmt.end_lineno, stmt.end_col_offset) - start
    body = text[: code_end - len(ctx.indent_of(stmt.lineno)) + len(indent)]
    return body + ctx.newline


def _short(text: str) -> str:
    return text if len(text) <= 50 else text[:47] + "..."
