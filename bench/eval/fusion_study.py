#!/usr/bin/env python3
"""fusion_study.py - compares fusions of the dense and BM25 candidate lists, with cross-validation.

usage: fusion_study.py DUMP.jsonl [DUMP.jsonl ...]
       fusion_study.py --variants VARDUMP.jsonl [VARDUMP.jsonl ...]

Each DUMP is what `bench_retrieval CATALOG QUERIES --dump DUMP` writes for one set: per query
the first embedder's and BM25's top 50 with scores. For every fusion family and parameter grid
it prints recall@5 per set (overall / paraphrase / lexical), then picks each family's
parameters by cross-validation: leave one set out, and leave one server out (folds by the
server of a query's first relevant tool, across all sets), and reports the held-out recall@5.

With --variants, each VARDUMP is what `bench_retrieval ... --dump-variants VARDUMP` writes: per
query the cosine to several texts of every tool (the whole text the registry embeds, a "head"
of server, name and first sentence, a "name" of server, name and title, and the later
sentences of the description alone). It scores a tool by several combinations of those
(the whole text alone, the max, blends of the whole text with the best part), fuses each with
BM25 (relative to its best hit, as the registry does, or by rank) and reports the same
in-sample and cross-validated recall@5 over the combined grid.
"""
import itertools
import json
import math
import sys


def load(path):
    qs = []
    with open(path) as f:
        for line in f:
            q = json.loads(line)
            q['set'] = path
            q['server'] = q['relevant'][0].split('__')[0]
            qs.append(q)
    return qs


def r_at(q, ranked, k=5):
    rel = set(q['relevant'])
    hit = sum(1 for i in ranked[:k] if i in rel)
    return hit / min(k, len(rel))


def fuse(q, fam, p):
    d, b = q['dense'], q['bm25']
    sc = {}
    if fam == 'dense':
        return [i for i, _ in d]
    if fam == 'bm25':
        return [i for i, _ in b]
    if fam == 'score':  # cosine + w * bm25 / (bm25 + half): today's registry
        w, half = p
        for i, s in d:
            sc[i] = sc.get(i, 0) + max(s, 0)
        for i, s in b:
            sc[i] = sc.get(i, 0) + w * s / (s + half)
    elif fam == 'rrf':
        w, k = p
        for r, (i, _) in enumerate(d):
            sc[i] = sc.get(i, 0) + 1 / (k + r + 1)
        for r, (i, _) in enumerate(b):
            sc[i] = sc.get(i, 0) + w / (k + r + 1)
    elif fam == 'minmax':
        w, = p
        for lst, wt in ((d, 1.0), (b, w)):
            if not lst:
                continue
            hi, lo = lst[0][1], lst[-1][1]
            for i, s in lst:
                sc[i] = sc.get(i, 0) + wt * ((s - lo) / (hi - lo) if hi > lo else 1)
    elif fam == 'relbm25':  # cosine + w * bm25 / best bm25 of the list (rank-free, scale-free)
        w, = p
        for i, s in d:
            sc[i] = sc.get(i, 0) + s
        if b:
            top = b[0][1]
            for i, s in b:
                sc[i] = sc.get(i, 0) + w * s / top
    elif fam == 'z':  # z-scores over each list's candidates
        w, = p
        for lst, wt in ((d, 1.0), (b, w)):
            if len(lst) < 2:
                continue
            xs = [s for _, s in lst]
            m = sum(xs) / len(xs)
            sd = math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs)) or 1
            for i, s in lst:
                sc[i] = sc.get(i, 0) + wt * (s - m) / sd
    elif fam == 'dense_gap':  # cosine gap to the best + w * relative bm25 (both in [0,1]-ish)
        w, t = p
        top = d[0][1] if d else 0
        for i, s in d:
            sc[i] = sc.get(i, 0) + (s - top) / t
        if b:
            btop = b[0][1]
            for i, s in b:
                sc[i] = sc.get(i, 0) + w * s / btop
        for i in list(sc):
            if i not in dict(d):
                sc[i] += (d[-1][1] - top) / t if d else 0
    return [i for i, _ in sorted(sc.items(), key=lambda x: (-x[1], x[0]))]


GRIDS = {
    'dense': [()],
    'bm25': [()],
    'score': [(w, h) for w in (0.1, 0.2, 0.3, 0.4, 0.6, 0.8) for h in (4, 8, 16, 32)],
    'rrf': [(w, k) for w in (0.25, 0.4, 0.5, 0.6, 0.8, 1.0) for k in (5, 10, 20, 30, 60)],
    'minmax': [(w,) for w in (0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0)],
    'relbm25': [(w,) for w in (0.02, 0.05, 0.08, 0.1, 0.15, 0.2, 0.3)],
    'z': [(w,) for w in (0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0)],
    'dense_gap': [(w, t) for w in (0.1, 0.2, 0.3, 0.5, 0.8) for t in (0.05, 0.1, 0.2, 0.4)],
}


def mean(xs):
    return sum(xs) / len(xs) if xs else float('nan')


def main():
    qs = [q for p in sys.argv[1:] for q in load(p)]
    sets = sorted({q['set'] for q in qs})
    # score[fam][p] = list of recall@5 per query (same order as qs)
    score = {f: {p: [r_at(q, fuse(q, f, p)) for q in qs] for p in g} for f, g in GRIDS.items()}

    def summary(vals, sel):
        return mean([v for v, q in zip(vals, qs) if sel(q)])

    def set_mean(vals):  # mean over sets of each set's recall@5: every set counts the same
        return mean([summary(vals, lambda q, s=s: q['set'] == s) for s in sets])

    print('family      params          ' + '  '.join(f'{s.split("/")[-1][:22]:>22}' for s in sets))
    for f, g in GRIDS.items():
        best = max(g, key=lambda p: set_mean(score[f][p]))
        for p in g if f in ('dense', 'bm25') else [best]:
            row = []
            for s in sets:
                a = summary(score[f][p], lambda q: q['set'] == s)
                pa = summary(score[f][p], lambda q: q['set'] == s and q['kind'] == 'paraphrase')
                le = summary(score[f][p], lambda q: q['set'] == s and q['kind'] == 'lexical')
                row.append(f'{a:.3f}/{pa:.3f}/{le:.3f}')
            print(f'{f:<11} {str(p):<15} ' + '  '.join(f'{r:>22}' for r in row) + '   (best in-sample)')

    # Cross-validation: choose on the training folds, score on the held-out fold.
    def cv(folds_of):
        folds = sorted({folds_of(q) for q in qs})
        out = {}
        for f, g in GRIDS.items():
            held = [None] * len(qs)
            chosen = []
            for fo in folds:
                tr = [j for j, q in enumerate(qs) if folds_of(q) != fo]
                best = max(g, key=lambda p: mean([score[f][p][j] for j in tr]))
                chosen.append(best)
                for j, q in enumerate(qs):
                    if folds_of(q) == fo:
                        held[j] = score[f][best][j]
            out[f] = (held, chosen)
        return out

    for name, fo in (('leave-one-set-out', lambda q: q['set']), ('leave-one-server-out', lambda q: q['set'] + q['server'])):
        if name == 'leave-one-set-out' and len(sets) < 2:
            continue
        print(f'\n{name}: held-out recall@5 per set (all/paraphrase/lexical); parameters chosen')
        for f, (held, chosen) in cv(fo).items():
            row = []
            for s in sets:
                a = summary(held, lambda q: q['set'] == s)
                pa = summary(held, lambda q: q['set'] == s and q['kind'] == 'paraphrase')
                le = summary(held, lambda q: q['set'] == s and q['kind'] == 'lexical')
                row.append(f'{a:.3f}/{pa:.3f}/{le:.3f}')
            common = max(set(chosen), key=chosen.count)
            print(f'{f:<11} ' + '  '.join(f'{r:>22}' for r in row) + f'   most chosen {common} ({chosen.count(common)}/{len(chosen)})')


def load_variants(path):
    qs = []
    with open(path) as f:
        head = json.loads(f.readline())
        tools, owner, kind = head['tools'], head['owner'], head['kind']
        for line in f:
            q = json.loads(line)
            q['set'] = path
            q['server'] = q['relevant'][0].split('__')[0]
            full = [0.0] * len(tools)
            hd = [0.0] * len(tools)
            nm = [0.0] * len(tools)
            sent = [-1.0] * len(tools)  # best later sentence
            for c, o, k in zip(q.pop('cos'), owner, kind):
                if k == 0:
                    full[o] = c
                elif k == 1:
                    hd[o] = c
                elif k == 2:
                    nm[o] = c
                elif c > sent[o]:
                    sent[o] = c
            q['v'] = (full, hd, nm, sent)
            q['tools'] = tools
            qs.append(q)
    return qs


def dense_scores(q, var):
    full, hd, nm, sent = q['v']
    name, a = var
    if name == 'full':
        return full
    if name == 'max_head':
        return [max(x, y) for x, y in zip(full, hd)]
    if name == 'max_parts':  # the whole text, the head or any later sentence
        return [max(x, y, z) for x, y, z in zip(full, hd, sent)]
    if name == 'max_all':
        return [max(x, y, z, w) for x, y, z, w in zip(full, hd, sent, nm)]
    if name == 'blend_head':
        return [(1 - a) * x + a * y for x, y in zip(full, hd)]
    if name == 'blend_parts':  # the whole text blended with its best part
        return [(1 - a) * x + a * max(y, z) for x, y, z in zip(full, hd, sent)]
    if name == 'blend_name':
        return [(1 - a) * x + a * y for x, y in zip(full, nm)]
    if name == 'blend_head_name':
        return [(1 - a) * x + a * 0.5 * (y + w) for x, y, w in zip(full, hd, nm)]
    raise ValueError(name)


VARS = [('full', 0), ('max_head', 0), ('max_parts', 0), ('max_all', 0)] + [
    (n, a) for n in ('blend_head', 'blend_parts', 'blend_name', 'blend_head_name')
    for a in (0.15, 0.3, 0.45, 0.6)]
FUSIONS = [('relbm25', w) for w in (0.05, 0.08, 0.1, 0.12, 0.15, 0.2, 0.3)] + [
    ('rrf', (w, k)) for w in (0.3, 0.5, 0.7, 1.0) for k in (10, 30, 60)]


def fuse_variant(q, dense, fus):
    tools = q['tools']
    top = sorted(range(len(tools)), key=lambda i: -dense[i])[:50]
    d = [(tools[i], dense[i]) for i in top]
    b = q['bm25']
    sc = {}
    fam, p = fus
    if fam == 'relbm25':
        for i, s in d:
            sc[i] = sc.get(i, 0) + max(s, 0)
        if b:
            btop = b[0][1]
            for i, s in b:
                sc[i] = sc.get(i, 0) + p * s / btop
    else:
        w, k = p
        for r, (i, _) in enumerate(d):
            sc[i] = sc.get(i, 0) + 1 / (k + r + 1)
        for r, (i, _) in enumerate(b):
            sc[i] = sc.get(i, 0) + w / (k + r + 1)
    return [i for i, _ in sorted(sc.items(), key=lambda x: (-x[1], x[0]))]


def main_variants(paths):
    qs = [q for p in paths for q in load_variants(p)]
    sets = sorted({q['set'] for q in qs})
    grid = [(v, f) for v in VARS for f in FUSIONS]
    score = {}
    for v in VARS:
        dens = [dense_scores(q, v) for q in qs]
        for f in FUSIONS:
            score[(v, f)] = [r_at(q, fuse_variant(q, dn, f)) for q, dn in zip(qs, dens)]
        for q in qs:
            pass
    def part(vals, s, kind=None):
        return mean([x for x, q in zip(vals, qs) if q['set'] == s and (kind is None or q['kind'] == kind)])

    def row(vals):
        return '  '.join(f'{part(vals, s):.3f}/{part(vals, s, "paraphrase"):.3f}/{part(vals, s, "lexical"):.3f}' for s in sets)

    def set_mean(vals):
        return mean([part(vals, s) for s in sets])

    print('in-sample recall@5 per set (all/paraphrase/lexical): ' + '  '.join(s.split('/')[-1] for s in sets))
    for v in VARS:
        best = max(FUSIONS, key=lambda f: set_mean(score[(v, f)]))
        print(f'{str(v):<26} {str(best):<22} {row(score[(v, best)])}')
    base = (('full', 0), ('relbm25', 0.1))
    print(f'{"today":<26} {str(base[1]):<22} {row(score[base])}')
    for name, fo in (('leave-one-server-out', lambda q: q['set'] + q['server']),
                     ('leave-one-set-out', lambda q: q['set'])):
        if name == 'leave-one-set-out' and len(sets) < 2:
            continue
        folds = sorted({fo(q) for q in qs})
        for label, cands in (('variants x fusions', grid), ('whole text only', [g for g in grid if g[0] == ('full', 0)])):
            held = [None] * len(qs)
            chosen = []
            for fd in folds:
                tr = [j for j, q in enumerate(qs) if fo(q) != fd]
                best = max(cands, key=lambda g: mean([score[g][j] for j in tr]))
                chosen.append(best)
                for j, q in enumerate(qs):
                    if fo(q) == fd:
                        held[j] = score[best][j]
            common = max(set(chosen), key=chosen.count)
            print(f'{name} {label}: {row(held)}  most chosen {common} ({chosen.count(common)}/{len(chosen)})')


if __name__ == '__main__':
    if len(sys.argv) > 1 and sys.argv[1] == '--variants':
        main_variants(sys.argv[2:])
    else:
        main()
