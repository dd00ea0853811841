#!/usr/bin/env python3
"""
Mutation testing of the drbd driver: does the test suite notice a bug?

Each mutant of tests/mutation/mutants.txt is a plausible one-line bug: a
line of a source file, found by its exact text, and what replaces it.
For each mutant, alone: the file is changed, ninja rebuilds what the
mutant's tests need, the tests run, and the file is put back as it was.
A mutant is "killed" when a test fails, "survived" when all pass, and
"build-failed" when it does not compile (not counted in the score).

usage: mutate.py [--build DIR] [--only ID,...] [--list] [--check]
                 [--no-baseline] [--show-output] [--results FILE]

  --check        only check that every mutant's text occurs exactly once
  --list         print the mutants and exit
  --only         run these mutants (ids, comma-separated)
  --no-baseline  skip running the tests once against the unchanged tree
                 (by default they must pass there first, or the run stops:
                 a test that fails anyway kills every mutant)
  --show-output  print the output of the test that killed each mutant
  --results      also write the table as tab-separated values to FILE

Safety: the original bytes of the file under mutation are saved in
build/mutate-journal.json before it is changed, and written back in a
finally clause (and at the start of the next run, if a run was killed
outright).  A file that someone else changed while its mutant ran is
not overwritten: the run stops and says so.  At the end the tree is
rebuilt from the restored sources.

Copyright (c) 2026 The qemu-drbd authors

SPDX-License-Identifier: GPL-2.0-or-later
"""

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MUTANTS = os.path.join(TOP, 'tests', 'mutation', 'mutants.txt')
JOURNAL = os.path.join(TOP, 'build', 'mutate-journal.json')

# What the iotests need built (the system emulator too: some start VMs,
# directly or through their library)
IOTEST_TARGETS = ['storage-daemon/qemu-storage-daemon', 'qemu-img',
                  'qemu-io', 'qemu-nbd', 'qemu-system-x86_64']

# Far above what the tests take (a unit test binary: seconds; an iotest:
# under a minute): a mutant that makes one hang is killed by the timeout
UNIT_TIMEOUT = 60
IOTEST_TIMEOUT = 240


@dataclass
class Test:
    kind: str                   # 'unit' or 'iotest'
    name: str                   # test-drbd-conn, drbd-edges
    paths: List[str] = field(default_factory=list)  # unit: -p filters

    def __str__(self) -> str:
        if self.paths:
            return f'{self.kind}:{self.name}:{"+".join(self.paths)}'
        return f'{self.kind}:{self.name}'


@dataclass
class Mutant:
    ident: str
    file: str
    find: str
    replace: str
    tests: List[Test]
    why: str
    line: int                   # where it starts in mutants.txt


class MutantsError(Exception):
    pass


def parse_test(spec: str) -> Test:
    """unit:NAME[:PATH[+PATH...]] or iotest:NAME"""
    parts = spec.split(':', 2)
    if len(parts) < 2 or parts[0] not in ('unit', 'iotest') or not parts[1]:
        raise MutantsError(f'bad test {spec!r}: want unit:NAME[:PATHS] or '
                           'iotest:NAME')
    t = Test(parts[0], parts[1])
    if len(parts) == 3:
        if t.kind != 'unit':
            raise MutantsError(f'{spec!r}: only unit tests take paths')
        t.paths = parts[2].split('+')
    return t


def parse_mutants(path: str) -> List[Mutant]:
    """
    Entries are blocks of "key: value" lines, separated by blank lines;
    '#' starts a comment line.  The value is what follows "key: "
    exactly (one space), so that find and replace keep their spaces.
    """
    mutants: List[Mutant] = []
    block: Dict[str, str] = {}
    start = 0

    def flush() -> None:
        if not block:
            return
        missing = {'id', 'file', 'find', 'replace', 'tests', 'why'} - \
            block.keys()
        if missing:
            raise MutantsError(f'{path}:{start}: missing '
                               f'{", ".join(sorted(missing))}')
        if block['find'] == block['replace']:
            raise MutantsError(f'{path}:{start}: find and replace are the '
                               'same')
        mutants.append(Mutant(block['id'], block['file'], block['find'],
                              block['replace'],
                              [parse_test(t) for t in block['tests'].split()],
                              block['why'], start))
        block.clear()

    with open(path, encoding='utf-8') as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip('\n')
            if line.startswith('#'):
                continue
            if not line.strip():
                flush()
                continue
            key, sep, value = line.partition(': ')
            if not sep and line.endswith(':'):
                key, value = line[:-1], ''
            elif not sep:
                raise MutantsError(f'{path}:{n}: not "key: value"')
            if key not in ('id', 'file', 'find', 'replace', 'tests', 'why'):
                raise MutantsError(f'{path}:{n}: unknown key {key!r}')
            if key in block:
                raise MutantsError(f'{path}:{n}: {key} given twice')
            if not block:
                start = n
            block[key] = value
    flush()
    seen = set()
    for m in mutants:
        if m.ident in seen:
            raise MutantsError(f'{path}:{m.line}: id {m.ident} used twice')
        seen.add(m.ident)
    return mutants


def apply_text(m: Mutant, text: str) -> str:
    """@text with @m applied; the find text must occur exactly once"""
    count = text.count(m.find)
    if count != 1:
        raise MutantsError(f'{m.ident}: the text {m.find!r} occurs {count} '
                           f'times in {m.file}, not once')
    return text.replace(m.find, m.replace, 1)


# Restoring sources

def write_bytes(path: str, data: bytes) -> None:
    with open(path, 'wb') as f:
        f.write(data)


def read_bytes(path: str) -> bytes:
    with open(path, 'rb') as f:
        return f.read()


def journal_save(path: str, original: bytes, mutated: bytes) -> None:
    os.makedirs(os.path.dirname(JOURNAL), exist_ok=True)
    tmp = JOURNAL + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        json.dump({'path': path, 'original': original.decode('utf-8'),
                   'mutated': mutated.decode('utf-8')}, f)
    os.replace(tmp, JOURNAL)


def restore(path: str, original: bytes, mutated: bytes) -> None:
    """Put @original back, unless someone changed the file meanwhile"""
    now = read_bytes(path)
    if now == mutated:
        write_bytes(path, original)
    elif now != original:
        raise SystemExit(f'mutate.py: {path} was changed by someone else '
                         'while its mutant ran; not overwritten.  The '
                         f'original is kept in {JOURNAL}.')
    with contextlib.suppress(FileNotFoundError):
        os.remove(JOURNAL)


def recover_journal() -> None:
    """A run killed while a mutant was applied: undo it first"""
    if not os.path.exists(JOURNAL):
        return
    with open(JOURNAL, encoding='utf-8') as f:
        j = json.load(f)
    print(f'mutate.py: restoring {j["path"]} from a run that did not end')
    restore(j['path'], j['original'].encode('utf-8'),
            j['mutated'].encode('utf-8'))


class Interrupted(Exception):
    pass


def on_signal(signum: int, _frame: object) -> None:
    raise Interrupted(f'signal {signum}')


# Building and testing

def env() -> Dict[str, str]:
    e = dict(os.environ)
    meson = os.path.join(TOP, 'build', 'meson', 'usr', 'lib', 'python3',
                         'dist-packages')
    if os.path.isdir(meson) and meson not in e.get('PYTHONPATH', ''):
        e['PYTHONPATH'] = meson + (':' + e['PYTHONPATH']
                                   if e.get('PYTHONPATH') else '')
    return e


def targets_for(tests: List[Test]) -> List[str]:
    targets: List[str] = []
    for t in tests:
        if t.kind == 'unit':
            targets.append(f'tests/unit/{t.name}')
        else:
            targets += IOTEST_TARGETS
    return sorted(set(targets))


def build(bld: str, targets: List[str]) -> Tuple[bool, str]:
    p = subprocess.run(['ninja', '-C', bld] + targets, env=env(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, check=False)
    return p.returncode == 0, p.stdout


def run_test(bld: str, t: Test) -> Tuple[bool, str]:
    """(passed, output)"""
    if t.kind == 'unit':
        cmd = [os.path.join(bld, 'tests', 'unit', t.name), '--tap', '-k']
        for p in t.paths:
            cmd += ['-p', p]
        cwd, timeout = bld, UNIT_TIMEOUT
    else:
        cmd = [sys.executable, './check', '-tap', '-raw', '-file', t.name]
        cwd, timeout = os.path.join(bld, 'tests', 'qemu-iotests'), \
            IOTEST_TIMEOUT
    # A group of its own, so that a timeout ends the daemons it started
    p = subprocess.Popen(cmd, cwd=cwd, env=env(), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return False, out + f'\n(timed out after {timeout} s)'
    except BaseException:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    if p.returncode != 0:
        return False, out
    # TAP from both: a skipped iotest, or none run, is no pass
    lines = out.splitlines()
    if any(ln.startswith('not ok') for ln in lines) or \
            not any(ln.startswith('ok ') for ln in lines) or \
            any(ln.startswith('ok ') and '# SKIP' in ln for ln in lines):
        return False, out
    return True, out


def run_tests(bld: str, tests: List[Test]) -> Tuple[Optional[Test], str]:
    """The first test of @tests that fails (unit tests first), or None"""
    for t in sorted(tests, key=lambda t: t.kind != 'unit'):
        ok, out = run_test(bld, t)
        if not ok:
            return t, out
    return None, ''


def failure_excerpt(out: str, lines: int = 60) -> str:
    """The end of a failing test's output, without the iotests' header
    and qemu-io's progress lines"""
    noise = re.compile(r'^(# [A-Z_]+ +--|# running |#\s*$|\+?(wrote|read) '
                       r'\d+/\d+ bytes|\+?\d+ [KMG]?i?B, \d+ ops)')
    keep = [ln for ln in out.splitlines() if not noise.match(ln)]
    return '\n'.join(keep[-lines:])


@dataclass
class Result:
    mutant: Mutant
    status: str                 # killed, survived, build-failed, error
    killer: str
    seconds: float


def run_mutant(bld: str, m: Mutant, show: bool) -> Result:
    start = time.monotonic()
    path = os.path.join(TOP, m.file)
    original = read_bytes(path)
    mutated = apply_text(m, original.decode('utf-8')).encode('utf-8')
    targets = targets_for(m.tests)
    journal_save(path, original, mutated)
    try:
        write_bytes(path, mutated)
        ok, out = build(bld, targets)
        if not ok:
            status, killer = 'build-failed', ''
            if show:
                print(failure_excerpt(out))
        else:
            failed, out = run_tests(bld, m.tests)
            status = 'killed' if failed else 'survived'
            killer = str(failed) if failed else ''
            if failed and show:
                print(f'--- {m.ident}: output of {failed}')
                print(failure_excerpt(out))
    finally:
        restore(path, original, mutated)
    return Result(m, status, killer, time.monotonic() - start)


def table(results: List[Result]) -> str:
    w = max([len(r.mutant.ident) for r in results] + [6])
    lines = [f'{"mutant":<{w}}  {"file":<24} {"result":<12} {"secs":>5}  '
             'killed by']
    for r in results:
        lines.append(f'{r.mutant.ident:<{w}}  {r.mutant.file:<24} '
                     f'{r.status:<12} {r.seconds:5.0f}  {r.killer}')
    return '\n'.join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[1],
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument('--build', default=os.path.join(TOP, 'build',
                                                    'qemu-build'))
    ap.add_argument('--mutants', default=MUTANTS)
    ap.add_argument('--only', default='')
    ap.add_argument('--list', action='store_true')
    ap.add_argument('--check', action='store_true')
    ap.add_argument('--no-baseline', action='store_true')
    ap.add_argument('--show-output', action='store_true')
    ap.add_argument('--results', default='')
    args = ap.parse_args()

    mutants = parse_mutants(args.mutants)
    if args.only:
        want = args.only.split(',')
        unknown = set(want) - {m.ident for m in mutants}
        if unknown:
            raise SystemExit(f'mutate.py: no mutant {", ".join(unknown)}')
        mutants = [m for m in mutants if m.ident in want]

    if args.list:
        for m in mutants:
            print(f'{m.ident}: {m.file}: {m.why}\n    '
                  f'{" ".join(str(t) for t in m.tests)}')
        return 0

    recover_journal()
    bad = 0
    for m in mutants:
        try:
            apply_text(m, read_bytes(os.path.join(TOP, m.file))
                       .decode('utf-8'))
        except (MutantsError, FileNotFoundError) as e:
            print(f'mutate.py: {e}', file=sys.stderr)
            bad += 1
    if bad:
        print(f'mutate.py: {bad} of {len(mutants)} mutants do not apply',
              file=sys.stderr)
        return 1
    if args.check:
        print(f'{len(mutants)} mutants, each text found exactly once')
        return 0

    bld = os.path.abspath(args.build)
    if not os.path.isdir(bld):
        raise SystemExit(f'mutate.py: no build in {bld}: run make build')
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    started = time.monotonic()
    all_tests: Dict[str, Test] = {}
    for m in mutants:
        for t in m.tests:
            all_tests[str(t)] = t
    results: List[Result] = []
    try:
        ok, out = build(bld, targets_for(list(all_tests.values())))
        if not ok:
            print(out[-3000:])
            raise SystemExit('mutate.py: the unchanged tree does not build')
        if not args.no_baseline:
            print(f'baseline: {len(all_tests)} tests on the unchanged tree',
                  flush=True)
            for t in all_tests.values():
                ok, out = run_test(bld, t)
                if not ok:
                    # Once more: a test that fails now and then is noted,
                    # one that fails twice stops the run
                    print(failure_excerpt(out))
                    print(f'mutate.py: {t} failed without any mutant; '
                          'trying it again', flush=True)
                    ok, out = run_test(bld, t)
                if not ok:
                    print(failure_excerpt(out))
                    raise SystemExit(f'mutate.py: {t} fails without any '
                                     'mutant: fix it first')
        for i, m in enumerate(mutants, 1):
            print(f'[{i}/{len(mutants)}] {m.ident} ({m.file}): {m.why}',
                  flush=True)
            r = run_mutant(bld, m, args.show_output)
            results.append(r)
            print(f'    {r.status}{" by " + r.killer if r.killer else ""} '
                  f'in {r.seconds:.0f} s', flush=True)
    except (KeyboardInterrupt, Interrupted) as e:
        print(f'mutate.py: interrupted ({e or "SIGINT"}); sources restored',
              file=sys.stderr)
    finally:
        # Everything back as the restored sources say
        print('rebuilding the unchanged tree', flush=True)
        units = sorted(f'tests/unit/{f[:-2]}' for f in
                       os.listdir(os.path.join(TOP, 'tests', 'unit'))
                       if f.startswith('test-drbd-') and f.endswith('.c'))
        ok, out = build(bld, IOTEST_TARGETS + units)
        if not ok:
            print(out[-3000:], file=sys.stderr)
            print('mutate.py: the rebuild of the unchanged tree failed',
                  file=sys.stderr)

    print()
    print(table(results))
    killed = sum(r.status == 'killed' for r in results)
    survived = [r for r in results if r.status == 'survived']
    broken = sum(r.status == 'build-failed' for r in results)
    scored = killed + len(survived)
    print()
    if scored:
        print(f'score: {killed}/{scored} killed ({100 * killed / scored:.0f} '
              f'%), {len(survived)} survived, {broken} did not build; '
              f'{time.monotonic() - started:.0f} s')
    for r in survived:
        print(f'survived: {r.mutant.ident}: {r.mutant.why}')
    if args.results:
        with open(args.results, 'w', encoding='utf-8') as f:
            f.write('mutant\tfile\tresult\tseconds\tkilled_by\n')
            for r in results:
                f.write(f'{r.mutant.ident}\t{r.mutant.file}\t{r.status}\t'
                        f'{r.seconds:.0f}\t{r.killer}\n')
    return 0 if len(results) == len(mutants) else 1


if __name__ == '__main__':
    sys.exit(main())
