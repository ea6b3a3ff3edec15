"""To-be-recorded analysis: which values the reverse sweep needs and how it gets them.

Model. The reverse of a statement S runs in a state where every object S's derivative
code reads holds the value it had when S ran forward. Positions are paths in the
normalized function (tuples; a Loop's init is (L, 0, k), body (L, 1, ...), inc (L, 2, k);
an If's branches (P, 0, ...) and (P, 1, ...)). Two questions are answered here:

1. `must_record(write)`: an assignment W to object o saves o's old value iff some use U of o
   (a read by derivative code) may run before W within one lifetime of o's scope: U is
   at or before W in program order, or a loop inside o's scope holds both. The reverse of
   W then restores o, so every earlier reverse sees the value it needs.

2. `block plans`: at the start of the reverse of a block, its locals hold their values
   from the end of the block. A needed local is recomputed there if its initializer only
   reads values that are still the same at the end of the block (single assignment,
   read-only memory, unchanged outer variables); otherwise its final value is pushed on
   the tape at the end of the block and popped at the start of the block's reverse.
   Recomputing adds uses at the end of the block (the values the initializer reads).

The transform supplies the uses: the objects each statement's derivative code reads.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import ir


def may_precede(pu: tuple, pw: tuple, scope: tuple, loops: tuple) -> bool:
    """May the use at pu run before (or be) the write at pw within one activation of the
    scope at path `scope`?"""
    if pu <= pw:
        return True
    n = len(scope)
    for L in loops:
        if L[:n] == scope and pu[:len(L)] == L and pw[:len(L)] == L:
            return True
    return False


@dataclass(frozen=True)
class ScopePlan:
    """How the reverse of one block gets back the locals it needs."""
    saved: tuple           # Decls whose final value is pushed at the block's end (in order)
    recomputed: tuple      # Decls re-executed at the start of the block's reverse (in order)


@dataclass(frozen=True)
class Recording:
    recorded: frozenset                 # paths of writes whose old value is recorded
    plans: dict                         # scope path -> ScopePlan
    uses: tuple                         # (path, key) after the fixed point, for printers
    keys: dict = field(default_factory=dict)   # path -> the objects recorded there
    # path -> facts (analysis/regions.py) under which its record is not needed: the write
    # records only when a test of them on entry fails
    conditional: dict = field(default_factory=dict)

    def must_record(self, path: tuple) -> bool:
        return path in self.recorded

    def conditions(self) -> list:
        """The distinct fact sets of the conditional records, in a fixed order: the k-th is
        tested on entry into the flag `_disjoint<k>`."""
        return sorted(set(self.conditional.values()), key=lambda f: sorted(map(sorted, f)))

    def condition_index(self, path: tuple) -> "int | None":
        f = self.conditional.get(path)
        return None if f is None else self.conditions().index(f)

    def recorded_at(self, path: tuple) -> frozenset:
        """The objects whose old values the statement at path records (an assignment from a
        call may record its target and what the call writes through its arguments)."""
        return self.keys.get(path, frozenset())

    def plan(self, scope: tuple) -> ScopePlan:
        return self.plans.get(scope, ScopePlan((), ()))

    def dump(self, describe) -> str:
        """describe(path) -> a one-line rendering of the statement or block at path."""
        lines = []
        for p in sorted(self.recorded):
            lines.append(f"record     {describe(p)}")
        for s in sorted(self.plans):
            pl = self.plans[s]
            if pl.saved or pl.recomputed:
                sv = ", ".join(d.var.name for d in pl.saved) or "-"
                rc = ", ".join(d.var.name for d in pl.recomputed) or "-"
                lines.append(f"scope      {describe(s)}: save [{sv}] recompute [{rc}]")
        return "\n".join(lines) or "(nothing to record)"


@dataclass
class Facts:
    """What the transform collected from one walk over the normalized function."""
    uses: list = field(default_factory=list)          # (path, key)
    writes: list = field(default_factory=list)        # (path, key, restore_reads)
    decls: list = field(default_factory=list)         # (path, scope path, Decl)
    scopes: dict = field(default_factory=dict)        # scope path -> end path
    loops: list = field(default_factory=list)         # loop paths
    ifs: set = field(default_factory=set)             # if paths
    scope_of: dict = field(default_factory=dict)      # object key -> scope path
    assigned: dict = field(default_factory=dict)      # var key -> [paths of writes]
    readonly_mem: set = field(default_factory=set)    # memory keys never written
    address_taken: set = field(default_factory=set)   # var keys whose address is taken
    params: set = field(default_factory=set)          # uids of the function's parameters
    globals: set = field(default_factory=set)         # uids of the non-const globals used
    write_once: set = field(default_factory=set)      # memory keys promised write-once
    # element-sensitive memory (analysis/regions.py): the offsets of the elements a
    # derivative reads ((path, key) -> [access or None]) and a write overwrites
    regions: object = None
    # (path, key): what the derivative at path reads of key is the value the statement there
    # wrote (its result), so the statement's own write is no conflict
    result_uses: set = field(default_factory=set)
    use_regions: dict = field(default_factory=dict)
    write_regions: dict = field(default_factory=dict)

    def fixed_param(self, uid: int) -> bool:
        """uid is a parameter the function never assigns nor takes the address of: it has one
        value throughout."""
        k = ("var", uid)
        return uid in self.params and k not in self.assigned and k not in self.address_taken


def plan(facts: Facts, key_reads, enabled: bool, combined_top: bool) -> Recording:
    """key_reads(expr) -> set of object keys an initializer reads (values and memory).

    A fixed point of two questions that feed each other: which locals each block saves or
    recomputes (recomputing makes what the initializer reads needed), and which writes are
    recorded (a restore reads what the write's target expression reads)."""
    return _Planner(facts, key_reads, enabled, combined_top).run()


class _Planner:
    """One run of :func:`plan` (the facts, and the blocks' declarations by scope)."""

    def __init__(self, facts: Facts, key_reads, enabled: bool, combined_top: bool):
        self.facts = facts
        self.key_reads = key_reads
        self.enabled = enabled
        self.combined_top = combined_top
        self.loops = tuple(facts.loops)
        self.by_scope: dict = {}
        for path, scope, d in facts.decls:
            self.by_scope.setdefault(scope, []).append((path, d))

    def written_after(self, key, after: tuple, within: tuple) -> bool:
        return any(p > after and p[:len(within)] == within
                   for p in self.facts.assigned.get(key, ()))

    def written_within(self, key, within: tuple) -> bool:
        return any(p[:len(within)] == within for p in self.facts.assigned.get(key, ()))

    def recomputable(self, path, scope, d: ir.Decl, local_ok) -> "set | None":
        """Keys the initializer reads if d can be recomputed at the end of its scope."""
        facts = self.facts
        v = d.var
        key = ("var", v.uid)
        if d.init is None or v.type.is_array or d.static:
            return None
        if facts.assigned.get(key) or key in facts.address_taken:
            return None
        if any(isinstance(x, ir.Call) and x.user for x in ir.walk_expr(d.init)):
            return None
        reads = self.key_reads(d.init)
        for k in reads:
            if k[0] == "mem":
                # read-only memory, or memory promised write-once (read only after its one
                # write: it still holds that value when the reverse sweep runs)
                if k not in facts.readonly_mem and k not in facts.write_once:
                    return None
                continue
            ks = facts.scope_of.get(k)
            if ks is None:          # a global
                continue
            if ks == scope:
                if k not in local_ok:
                    return None
                if self.written_after(k, path, scope):
                    return None
            elif self.written_within(k, scope):
                return None
        return reads

    def scope_plan(self, scope, items, need: set) -> "tuple[ScopePlan, list]":
        """One block's plan given what is needed in it; the uses its recomputations add."""
        facts = self.facts
        end = facts.scopes[scope]
        local_ok = {("var", d.var.uid) for _, d in items}
        decisions = {}
        for path, d in reversed(items):   # a recomputed local's inputs become needed
            if (d.var.uid in facts.params or d.var.uid in facts.globals) and \
                    not facts.assigned.get(("var", d.var.uid)) and \
                    (("mem", d.var.uid) not in facts.scope_of or
                     ("mem", d.var.uid) in facts.readonly_mem):
                continue                      # an unchanged parameter is always there
            if ("var", d.var.uid) not in need and ("mem", d.var.uid) not in need:
                continue
            reads = self.recomputable(path, scope, d, local_ok) \
                if (self.enabled or d.var.type.is_pointer) else None
            decisions[d.var.uid] = reads
            if reads is not None:
                need |= reads
        saved, recomputed, extra = [], [], []
        for path, d in items:
            if d.var.uid not in decisions:
                continue
            reads = decisions[d.var.uid]
            if reads is None:
                saved.append(d)
            else:
                recomputed.append(d)
                extra.extend((end, k) for k in reads)
        return ScopePlan(tuple(saved), tuple(recomputed)), extra

    def scope_plans(self, uses_now, restored):
        out, extra = {}, []
        for scope, items in self.by_scope.items():
            if self.combined_top and scope == ():
                continue
            need = {k if k[0] != "addr" else ("var", k[1])
                    for p, k in uses_now if p[:len(scope)] == scope}
            need |= {k for p, k in restored if p[:len(scope)] == scope}   # restores write it
            out[scope], more = self.scope_plan(scope, items, need)
            extra.extend(more)
        return out, extra

    def records(self, uses_now):
        facts, loops = self.facts, self.loops
        rec, more, restored = set(), [], []
        self.rec_keys: dict = {}
        self.conditional: dict = {}
        self.unconditional: set = set()
        for pw, key, restore_reads in facts.writes:
            if key in facts.write_once:
                continue              # never overwrites a value anyone reads
            scope = facts.scope_of.get(key, ())
            by_call = ("call",) in restore_reads
            # a callee's sweep reads what the call itself wrote in its post-call state: its own
            # read conflicts with its own write only when a loop repeats the call
            again = by_call and any(L[:len(scope)] == scope and pw[:len(L)] == L for L in loops)
            verdict: object = not self.enabled and not by_call
            for pu, k in uses_now:
                if verdict is True:
                    break
                # a derivative reading what this very write wrote: no conflict in the same
                # iteration (in an earlier one, the elements decide)
                result = pu == pw and (pu, key) in facts.result_uses
                if result and not any(L[:len(scope)] == scope and pw[:len(L)] == L
                                      for L in loops):
                    continue
                if k == key and (pu != pw or not by_call or again) and \
                        may_precede(pu, pw, scope, loops):
                    v = self.element_conflict(pu, pw, key, scope, result)
                    verdict = v if verdict is False else (
                        v if v is True else (verdict | v if v else verdict))
            if verdict is not False:
                rec.add(pw)
                self.rec_keys.setdefault(pw, set()).add(key)
                if verdict is not True:
                    self.conditional[pw] = self.conditional.get(pw, frozenset()) | verdict
                else:
                    self.unconditional.add(pw)
                more.extend((pw, k) for k in restore_reads if k != ("call",))
                restored.append((pw, key))
        return rec, more, restored

    def element_conflict(self, pu, pw, key, scope, result: bool = False):
        """The element-sensitive answer (regions.Regions.conflict) for a use and a write of
        one object; True when either's elements are not known."""
        f = self.facts
        if f.regions is None or key[0] != "mem" or (pw, key) not in f.write_regions or \
                (pu, key) not in f.use_regions:
            return True
        w = f.write_regions[(pw, key)]
        verdict: object = False
        for u in f.use_regions[(pu, key)]:
            v = f.regions.conflict(pu, u, pw, w, scope, self.loops, result)
            if v is True:
                return True
            if v:
                verdict = v if verdict is False else verdict | v
        return verdict

    def run(self) -> Recording:
        base = list(self.facts.uses)
        recorded: set = set()
        restore_uses: list = []
        restored: list = []
        while True:
            extra: list = []
            while True:       # recomputing a local makes what it reads needed, maybe elsewhere
                plans, new_extra = self.scope_plans(base + restore_uses + extra, restored)
                if set(new_extra) <= set(extra):
                    break
                extra = sorted(set(extra) | set(new_extra))
            uses = base + restore_uses + extra
            new_recorded, new_restore_uses, new_restored = self.records(uses)
            if new_recorded == recorded:
                break
            recorded, restore_uses, restored = new_recorded, new_restore_uses, new_restored
        keys = {p: frozenset(k) for p, k in getattr(self, "rec_keys", {}).items()}
        cond = {p: v for p, v in getattr(self, "conditional", {}).items()
                if p not in self.unconditional}
        return Recording(frozenset(recorded), plans, tuple(uses), keys, cond)
