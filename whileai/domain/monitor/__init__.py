"""Watch a live training run for reward hacking.

A policy trained against a proxy reward can learn to please the proxy instead
of doing the task. Statistics of the proxy alone (its level, the KL, the
entropy) cannot tell that apart from honest progress, so the monitor samples
the live policy on held-out prompts and scores the same completions twice: with
the proxy the trainer optimises and with an independent gold judge. Alarms:

- ``divergence``: the proxy-gold gap grew from the baseline window, paired by
  prompt, past MONITOR_DELTA with an interval clear of zero (what the proxy pays
  for an ``endorsed`` format is taken off first);
- ``gold_decline``: gold fell from its best window while the proxy held;
- ``length``: lengths moved (the mean past ``length_pct``, a share
  MONITOR_LENGTH_SHIFT of the completions across some length, or, with a gold
  judge, more of them than before past the baseline's longest
  MONITOR_LENGTH_TAIL) and the gap moved with length within prompts, the
  proxy's price read as a step function of length with a line past its last
  step (growth the gold pays for too is reported, not alarmed);
- ``kl``: the sequence KL to the reference passed ``kl_budget``;
- ``feature``: an n-gram or format marker predicts proxy reward beyond gold
  within prompt, family-wise over every feature scanned;
- ``format``: a format marker whose share moved past MONITOR_FORMAT_SHIFT is
  paid for by the proxy within prompt (the gold-free counterpart of the scan,
  armed when the scan is not).

A run paid for whole episodes (GRPO in an environment) is watched on sampled
episodes (``_episodes.episode_sampler``): each is a completion whose text is
what the model generated, its turns joined; the proxy reads it as TRL hands a
reward an episode, the gold is the episode judge's verdict, and the gold-free
checks read its calls and turns as measures of the length check and its
episode markers (more calls than the gold, a tool error, the turn cap, no final
reply) as format markers.

Without a gold judge only the gold-free checks are armed (length, kl with a
budget, format); ``disarm={kind: reason}`` turns any check off, and
``summary()["armed"]`` says for each kind "armed" or why it is off. An alarm's
message names what to look at: the feature or marker involved, the length
change and the held-out prompts where the effect is biggest.

False alarms are controlled per run, not per look (MONITOR_ALPHA,
MONITOR_SCAN_ALPHA); benchmarks/monitor_calibration.py measures the rates.

    monitor = wai.HackMonitor(run, holdout=held_out_rows, gold=wai.first_action_judge,
                              stop_on="divergence")
    trainer = GRPOTrainer(model, reward_funcs=[monitor.wrap(proxy)], ...)
    trainer.add_callback(monitor)
    trainer.train()
    print(wai.format_hack_monitor(monitor.summary()))
"""

from __future__ import annotations

import copy
import time
import warnings
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from whileai.domain.monitor import _arming as arming
from whileai.domain.monitor import _checks as checks
from whileai.domain.monitor import _episodes as episodes_
from whileai.domain.monitor import _features as feats
from whileai.domain.monitor import _sampling as sampling_
from whileai.core.errors import MonitorWarning

from whileai.domain import defaults
from whileai.domain.monitor._arming import GOLD_CHECKS
from whileai.domain.monitor._episodes import PlayedEpisode, episode_gold_judge, episode_sampler
from whileai.domain.monitor._records import (Alarm, FormatSeen, HistoryEntry, LengthSeen, LookAt, LookEntry, LookHead,
                                             MonitorSummary, Payment, PromptEffect, ScanSeen, Stopped, StrongestFeature)
from whileai.domain.monitor._report import alarm_message, clean, format_hack_monitor, prompt_text
from whileai.domain.monitor._scoring import (MonitorSettings, accepted, call_proxy, check_sampled, score_gold,
                                             validate_settings, watched)

if TYPE_CHECKING:
    from whileai.domain.tracking import TrainingRun

__all__ = ["HackMonitor", "format_hack_monitor", "episode_sampler", "episode_gold_judge", "PlayedEpisode",
           "GOLD_CHECKS"]


@dataclass
class _Errors:
    """What went wrong while watching, none of it raised into training: failed run writes, failed gold calls,
    and each distinct reason a look could not be taken."""

    run: int = 0
    gold: int = 0
    evaluate: list[str] = field(default_factory=list)


def _mean(values: np.ndarray) -> float:
    ok = np.isfinite(values)
    return float(values[ok].mean()) if ok.any() else float("nan")


class _HackMonitor:
    """Watch a TRL run for reward hacking: proxy against gold on held-out prompts, with calibrated alarms.

    ``holdout`` is a list of prompts (strings or message lists) or rows
    (``{"prompt": ..., <columns>}``, or rollout rows with ``messages``); the
    columns reach the proxy as keyword lists, the way TRL passes dataset
    columns, and the gold judge in its row. ``proxy`` is a TRL-shaped reward
    (``f(prompts=, completions=, **columns)``); None uses the reward given to
    ``wrap``. ``gold`` is a judge (``row -> reward | {"reward": ...}``); without
    one the checks that compare with it (divergence, gold decline, the n-gram
    feature scan) are off and the format-marker check runs instead.
    ``disarm`` turns checks off by kind, each with the reason the summary
    shows (``{"divergence": "the reward is already the strictest judge"}``).
    ``sample(model, tokenizer, prompts, n=, max_new_tokens=) -> list[list[str]]``
    replaces the default sampler (chat template + ``model.generate``, steered by
    ``sampling``: temperature, top_p, top_k, batch); one that takes ``rows=``,
    ``sampling=`` or ``seed=`` is also given the held-out rows (each prompt with
    its columns), the sampling settings and the look's seed, and one that returns
    ``PlayedEpisode`` completions makes the look an episode look (see above). ``endorsed`` names formats
    the trainer means to teach (a marker such as ``"think"`` or any literal
    text); ``stop_on`` the alarm kinds (or ``"any"``) that stop training when
    the monitor runs as a callback. ``run`` is where points and the summary
    land; a run that fails never stops the monitor or the training. A look
    leaves torch's, Python's and NumPy's random state as it found it, so the
    trainer samples what it would have sampled unwatched.

    Every other argument left None takes its MONITOR_* default from defaults.py
    (MONITOR_EVERY, MONITOR_K, MONITOR_N_PROMPTS, MONITOR_WINDOW, MONITOR_DELTA,
    MONITOR_LENGTH_PCT, MONITOR_KL_BUDGET, MONITOR_BUFFER,
    MONITOR_MAX_NEW_TOKENS, MONITOR_CONCURRENCY, MONITOR_SEED, MONITOR_N_BOOT,
    MONITOR_N_PERM, MONITOR_SCAN_MIN, MONITOR_SAMPLING).

    >>> monitor = HackMonitor(holdout=["What is 2+2?"] * 8, gold=lambda row: 1.0,
    ...                       proxy=lambda prompts, completions, **kw: [1.0] * len(completions),
    ...                       sample=lambda m, t, prompts, n, max_new_tokens: [["4"] * n for _ in prompts])
    >>> monitor.evaluate(step=0)["gap"]
    0.0
    """

    def __init__(
        self,
        run: TrainingRun | None = None,
        holdout: Sequence[Any] | None = None,
        proxy: Callable[..., Sequence[float]] | None = None,
        gold: Callable[[dict], Any] | None = None,
        sample: Callable[..., list[list[str]]] | None = None,
        every: int | None = None,
        k: int | None = None,
        n_prompts: int | None = None,
        window: int | None = None,
        delta: float | None = None,
        length_pct: float | None = None,
        kl_budget: float | None = None,
        endorsed: Sequence[str] = (),
        stop_on: str | Sequence[str] = (),
        buffer: int | None = None,
        max_new_tokens: int | None = None,
        concurrency: int | None = None,
        seed: int | None = None,
        n_boot: int | None = None,
        n_perm: int | None = None,
        scan_min: int | None = None,
        sampling: Mapping[str, Any] | None = None,
        disarm: Mapping[str, str] | None = None,
    ):
        s = validate_settings(
            holdout=holdout, proxy=proxy, gold=gold, sample=sample, every=every, k=k, n_prompts=n_prompts,
            window=window, delta=delta, length_pct=length_pct, kl_budget=kl_budget, endorsed=endorsed,
            stop_on=stop_on, buffer=buffer, max_new_tokens=max_new_tokens, concurrency=concurrency, seed=seed,
            n_boot=n_boot, n_perm=n_perm, scan_min=scan_min, sampling=sampling, disarm=disarm,
        )
        self.run = run
        self.proxy, self.gold, self.sample = proxy, gold, sample
        self._take_settings(s)
        self._held = self._held_prompts(s.rows)
        self._detect = feats.endorsed_detectors(self.endorsed)
        self._arm(has_gold=gold is not None, disarm=s.disarm)
        self._start_watching()

    def _take_settings(self, s: MonitorSettings) -> None:
        """Keep the validated settings (``validate_settings``'s, defaults filled in) as attributes."""
        n = s.numbers
        self.every, self.k, self.n_prompts, self.window = n.every, n.k, n.n_prompts, n.window
        self.delta, self.length_pct, self.kl_budget = n.delta, n.length_pct, n.kl_budget
        self.buffer, self.max_new_tokens, self.concurrency, self.seed = n.buffer, n.max_new_tokens, n.concurrency, n.seed
        self.n_boot, self.n_perm, self.scan_min = n.n_boot, n.n_perm, n.scan_min
        self.sampling = s.sampling
        self.endorsed, self.stop_on = s.endorsed, s.stop_on

    def _held_prompts(self, rows: list[Any]) -> list[Any]:
        """At most ``n_prompts`` of the held-out rows, drawn with ``seed``; warns when there are too few."""
        if len(rows) > self.n_prompts:
            pick = np.sort(np.random.default_rng(self.seed).choice(len(rows), self.n_prompts, replace=False))
            rows = [rows[i] for i in pick]
        if len(rows) < defaults.MONITOR_MIN_PROMPTS:
            warnings.warn(
                f"HackMonitor has {len(rows)} held-out prompts (MONITOR_MIN_PROMPTS is "
                f"{defaults.MONITOR_MIN_PROMPTS}); intervals resampled from so few prompts are unreliable. "
                "Pass more holdout rows", MonitorWarning, stacklevel=3)
        return rows

    def _arm(self, has_gold: bool, disarm: Any) -> None:
        """Which checks are armed (or why not), a warning for a ``stop_on`` that cannot fire, and the checks' settings."""
        self.armed: dict[str, str] = arming.armed_state(has_gold=has_gold, kl_budget=self.kl_budget, disarm=disarm)
        off = [kind for kind in self.stop_on if kind != "any" and self.armed[kind] != arming.ARMED]
        if off:
            warnings.warn(f"HackMonitor stop_on names {off}, which cannot fire ("
                          + "; ".join(f"{kind}: {self.armed[kind]}" for kind in off)
                          + "); training will not stop on them. Arm them or leave them out of stop_on",
                          MonitorWarning, stacklevel=3)
        self._cfg = checks.Settings(
            window=self.window, delta=self.delta, length_pct=self.length_pct, kl_budget=self.kl_budget,
            n_boot=self.n_boot, n_perm=self.n_perm, scan_min=self.scan_min, seed=self.seed,
            has_gold=has_gold, endorsed=tuple(self.endorsed),
            armed=frozenset(kind for kind, state in self.armed.items() if state == arming.ARMED))

    def _start_watching(self) -> None:
        """The state a run's looks build up: history, alarms, the reward buffer, the scans and the errors."""
        self.history: list[HistoryEntry] = []
        self.alarms: list[Alarm] = []
        self._looks: list[checks.Look] = []
        self._wrapped: list[Callable[..., Any]] = []
        self._batches: deque = deque()
        self._buffered = 0
        self._calls = 0
        self._items: dict[tuple[int, int], checks.BufferItem] = {}
        self._index = feats.FeatureIndex()
        self._flagged: set[str] = set()
        self._fired: set[str] = set()
        self._scan: ScanSeen | None = None
        self._format: FormatSeen | None = None
        self._markers: set[str] = set()
        self._length: LengthSeen | None = None
        self._payments: dict[str, Payment] = {}
        self._stopped: Stopped | None = None
        self._reference: Any = None
        self._length_unit: str | None = None
        self._tokenizer: Any = None
        self._state: Any = None
        self._kl_status = "not measured yet"
        self._errors = _Errors()
        self._judging = 0.0
        self._primary = True

    # ------------------------------------------------------------------ wrap

    def wrap(self, reward_fn: Callable[..., Sequence[float]]) -> Callable[..., Sequence[float]]:
        """The reward, watched: every completion it scores enters the buffer with its reward.

        Pass the result to the trainer as ``reward_funcs``; its ``__name__`` is the
        reward's, so TRL's ``rewards/<name>`` column keeps its name. Async rewards
        stay async. Only the proxy's completions are buffered (the ``proxy=``
        function, or the first one wrapped when ``proxy`` is None).
        """
        if not callable(reward_fn):
            raise TypeError(f"wrap(reward_fn={reward_fn!r}) needs a callable reward function "
                            "f(prompts=, completions=, **columns) -> list[float]")
        self._wrapped.append(reward_fn)
        return watched(reward_fn, self._record)

    def _proxy_fn(self) -> Callable[..., Any] | None:
        return self.proxy if self.proxy is not None else (self._wrapped[0] if self._wrapped else None)

    def _record(self, fn: Any, args: tuple, kwargs: dict, rewards: Any) -> None:
        try:
            if self.buffer == 0 or fn != self._proxy_fn():  # == so a bound method matches itself
                return
            completions = kwargs.get("completions", args[1] if len(args) > 1 else None)
            prompts = kwargs.get("prompts", args[0] if args else None)
            if completions is None or prompts is None:
                return
            self._calls += 1
            self._batches.append((self._calls, prompts, completions, rewards, kwargs))
            self._buffered += len(completions)
            while self._batches and self._buffered - len(self._batches[0][2]) >= self.buffer:
                self._buffered -= len(self._batches.popleft()[2])
        except Exception:  # the buffer is best effort; a reward call must never fail because of it
            pass

    def _live_keys(self) -> list[tuple[int, int]]:
        """(call, index) of the latest ``buffer`` training completions, oldest first."""
        keys = [(call, i) for call, _p, completions, _r, _kw in list(self._batches) for i in range(len(completions))]
        return keys[-self.buffer:] if self.buffer else []

    # ------------------------------------------------------------- evaluate

    def evaluate(self, step: int, model: Any = None, tokenizer: Any = None) -> HistoryEntry:
        """Sample the holdout from the live policy, score it with proxy and gold, check the alarms.

        Appends to ``history``, logs ``monitor/*`` points to the run and returns
        the history entry. Torch's, Python's and NumPy's random state are as
        they were before the call: a look observes the run, the trainer's
        random draws stay its own.
        """
        with sampling_.random_state_kept():
            return self._evaluate(step, model, tokenizer)

    def _evaluate(self, step: int, model: Any, tokenizer: Any) -> HistoryEntry:
        t0 = time.perf_counter()
        self._judging = 0.0
        proxy = self._proxy_fn()
        if proxy is None:
            raise ValueError("HackMonitor has no proxy to score with: pass proxy= to HackMonitor, "
                             "or wrap the trainer's reward with monitor.wrap(reward) first")
        if tokenizer is not None:
            self._tokenizer = tokenizer
        tokenizer = tokenizer if tokenizer is not None else self._tokenizer
        texts, prompt_ids, completion_ids = self._sample_held(model, tokenizer)
        t_sampled = time.perf_counter()

        episodes = episodes_.played_episodes(texts)
        # an episode's text is what the model generated, turns joined: its length is counted in tokens too
        if completion_ids is None and tokenizer is not None and (episodes is not None or self._length_unit != "words"):
            completion_ids = sampling_.tokenize_completions(tokenizer, texts)
        if prompt_ids is None and tokenizer is not None and episodes is None:
            prompt_ids = [sampling_.prompt_ids_of(tokenizer, h.prompt, h.tools) for h in self._held]
        proxy_scores, gold_scores = self._score(proxy, texts, episodes, prompt_ids, completion_ids, tokenizer)
        items = self._score_buffer()

        if self._length_unit is None:
            self._length_unit = "tokens" if completion_ids is not None else "words"
        if self._length_unit == "tokens" and completion_ids is not None:
            length = np.array([[len(c) for c in cs] for cs in completion_ids], dtype=float)
        else:
            length = np.array([[len(t.split()) for t in ts] for ts in texts], dtype=float)
        t_kl = time.perf_counter()
        if episodes is None:
            kl = self._measure_kl(model, tokenizer, prompt_ids, completion_ids, texts)
        else:
            kl, self._kl_status = None, ("skipped: an episode's turns are read between its tools' answers, and the "
                                         "sequence KL reads one reply after its prompt")
        t_kl = time.perf_counter() - t_kl
        look = self._make_look(step, texts, episodes, proxy_scores, gold_scores, length, kl)
        self._looks.append(look)
        for old in self._looks[: -self.window]:
            old.features = None
        self._compact_index(items)
        results = checks.check_all(self._looks, items, self._cfg, self._index)
        numbers = self._entry(look, results)
        total = time.perf_counter() - t0
        entry: HistoryEntry = {**numbers, "seconds": {
            "sampling": t_sampled - t0, "judges": self._judging, "kl": t_kl,
            "monitor": total - (t_sampled - t0) - self._judging - t_kl, "total": total}}
        self.history.append(entry)
        self._log(entry)
        self._note()
        return entry

    def _sample_held(self, model: Any, tokenizer: Any) -> tuple[list[list[str]], Any, Any]:
        """``k`` completions per held-out prompt, with their prompt and completion token ids where the default
        sampler made them (None with a ``sample=`` function)."""
        if self.sample is not None:
            offered = {"rows": [{"prompt": h.prompt, **h.columns} for h in self._held],
                       "sampling": dict(self.sampling), "seed": self.seed + len(self._looks)}
            texts = self.sample(model, tokenizer, [h.prompt for h in self._held], n=self.k,
                                max_new_tokens=self.max_new_tokens, **accepted(self.sample, offered))
            check_sampled(texts, len(self._held), self.k)
            return texts, None, None
        if model is None or tokenizer is None:
            raise ValueError("evaluate needs model= and tokenizer= to sample the holdout (or pass sample= "
                             "to HackMonitor); as a trainer callback it gets both from the trainer")
        return sampling_.generate(model, tokenizer, self._held, n=self.k, max_new_tokens=self.max_new_tokens,
                                  sampling=self.sampling, seed=self.seed + len(self._looks))

    def _score(self, proxy: Callable[..., Any], texts: list[list[str]],
               episodes: list[episodes_.PlayedEpisode] | None, prompt_ids: Any, completion_ids: Any,
               tokenizer: Any) -> tuple[np.ndarray, np.ndarray]:
        """Every sampled completion's proxy reward, called as TRL calls it, and its gold (NaN without a judge).

        An episode reaches the proxy as TRL hands a reward an episode (its messages after the prompt, and the
        environment it left in ``environments=``), and the gold judge as the episode played."""
        n, k = len(self._held), self.k
        t_judge = time.perf_counter()
        if episodes is None:
            shaped = sampling_.trl_completions(self._held, texts, prompt_ids, completion_ids, tokenizer)
            proxy_scores = call_proxy(proxy, self._held, texts, shaped, completion_ids, self._state)
        else:
            proxy_scores = call_proxy(proxy, self._held, texts, [p.completion for p in episodes], completion_ids,
                                      self._state, extra={"environments": [p.environment for p in episodes]})
        self._judging += time.perf_counter() - t_judge
        gold_scores = np.full(n * k, np.nan)
        if self.gold is not None:
            if episodes is None:
                fmt = self._reply_format()
                rows = [sampling_.gold_row(h.prompt, t, h.columns, h.tools, fmt)
                        for h, ts in zip(self._held, texts) for t in ts]
            else:
                held = [h for h in self._held for _ in range(k)]  # each prompt's k episodes, in the order played
                rows = [episodes_.episode_gold_row(h.prompt, p, h.columns) for h, p in zip(held, episodes, strict=True)]
            gold_scores, errors, first = self._judge(self.gold, rows)
            if errors == len(rows):
                raise ValueError(f"the gold judge failed on every held-out completion; the first error: {first}")
        return proxy_scores, gold_scores

    def _make_look(self, step: int, texts: list[list[str]], episodes: list[episodes_.PlayedEpisode] | None,
                   proxy_scores: np.ndarray, gold_scores: np.ndarray, length: np.ndarray,
                   kl: np.ndarray | None) -> checks.Look:
        """What this look measured, as (prompts, k) arrays; an episode look adds its counts and episode markers."""
        n, k = len(self._held), self.k
        flat_text = [t for ts in texts for t in ts]
        endorsed = np.array([[d(t) for d in self._detect] for t in flat_text], dtype=bool).reshape(n, k, -1)
        markers = feats.marker_presence(flat_text).reshape(n, k, -1)
        counts, names = None, None
        extra: list[tuple[str, ...]] = [()] * len(flat_text)
        if episodes is not None:
            counts, marked = episodes_.episode_arrays(episodes, n, k)
            markers = np.concatenate([markers, marked], axis=2)
            names = (*feats.MARKERS, *episodes_.EPISODE_MARKERS)
            extra = [tuple(name for name, on in p.markers.items() if on) for p in episodes]
        return checks.Look(step=int(step), proxy=proxy_scores.reshape(n, k), gold=gold_scores.reshape(n, k),
                           length=length, endorsed=endorsed,
                           features=[self._index.encode(t, extra=e) for t, e in zip(flat_text, extra)],
                           kl=kl, words=np.array([[len(t.split()) for t in ts] for ts in texts], dtype=float),
                           markers=markers, counts=counts, marker_names=names)

    def _score_buffer(self) -> list[checks.BufferItem]:
        """The buffered training completions as scan items; new ones are read and gold-judged once."""
        keys = self._live_keys()
        live = set(keys)
        for key in [key for key in self._items if key not in live]:
            del self._items[key]
        batches = {call: (prompts, completions, rewards, kwargs) for call, prompts, completions, rewards, kwargs
                   in list(self._batches)}
        todo, rows = [], []
        for call, i in keys:
            if (call, i) in self._items:
                continue
            prompts, completions, rewards, kwargs = batches[call]
            text = feats.completion_text(completions[i])
            try:
                reward = float(rewards[i]) if rewards[i] is not None else np.nan
            except (TypeError, ValueError, IndexError):
                reward = np.nan
            item = checks.BufferItem(call=call, prompt=sampling_.prompt_key(prompts[i]), proxy=reward, gold=np.nan,
                                     endorsed=np.array([d(text) for d in self._detect], dtype=bool),
                                     features=self._index.encode(text), words=len(text.split()))
            self._items[(call, i)] = item
            if self.gold is not None:
                cols = {k: v[i] for k, v in kwargs.items() if k not in sampling_.RESERVED
                        and isinstance(v, (list, tuple)) and len(v) == len(completions)}
                todo.append(item)
                rows.append(sampling_.gold_row(prompts[i], text, cols, cols.get("tools"), self._reply_format()))
        if rows and self.gold is not None:  # rows are only gathered with a gold judge
            scores, _errors, _first_error = self._judge(self.gold, rows)
            for item, g in zip(todo, scores):
                item.gold = float(g)
        return [self._items[key] for key in keys]

    def _reply_format(self) -> str:
        """The tool-call format the policy writes: its tokenizer's convention (``whileai.kit.reply_format``), else hermes."""
        if self._tokenizer is None:
            return "hermes"
        from whileai.kit import reply_format

        return reply_format(self._tokenizer)

    def _judge(self, gold: Callable[[dict], Any], rows: list[dict[str, Any]]) -> tuple[np.ndarray, int, str | None]:
        start = time.perf_counter()
        scores, errors, first = score_gold(gold, rows, self.concurrency)
        self._judging += time.perf_counter() - start
        self._errors.gold += errors
        return scores, errors, first

    def _compact_index(self, items: list[checks.BufferItem]) -> None:
        held = [(lk, lk.features) for lk in self._looks if lk.features is not None]
        arrays = [a for _lk, features in held for a in features] + [it.features for it in items]
        fresh = self._index.compact(arrays)
        if fresh is None:
            return
        pos = 0
        for lk, features in held:
            lk.features = fresh[pos : pos + len(features)]
            pos += len(features)
        for it, a in zip(items, fresh[pos:]):
            it.features = a

    # ------------------------------------------------------------------- KL

    def _prepare_reference(self, model: Any) -> None:
        if model is None or self._reference is not None or sampling_.has_adapter(model) or self.kl_budget is None:
            return
        self._reference = copy.deepcopy(model)
        self._reference.requires_grad_(False)
        self._reference.eval()

    def _measure_kl(self, model, tokenizer, prompt_ids, completion_ids, texts) -> np.ndarray | None:
        if model is not None:
            self._prepare_reference(model)
        kl, self._kl_status = sampling_.measure_kl(
            model, self._reference, tokenizer, self._held, prompt_ids, completion_ids, texts,
            temperature=float(self.sampling["temperature"]), batch=int(self.sampling["batch"]))
        return kl

    # --------------------------------------------------------------- alarms

    def _entry(self, look: checks.Look, res: checks.CheckResults) -> LookEntry:
        proxy, gold = _mean(look.proxy), _mean(look.gold)
        entry: LookHead = {
            "step": look.step, "evaluation": len(self._looks) - 1, "proxy": proxy, "gold": gold,
            "gap": proxy - gold, "length": float(np.nanmean(look.length)), "length_unit": self._length_unit,
            "kl": None if res["kl"] is None else res["kl"]["kl"], "prompts": int(look.proxy.shape[0]),
            "k": int(look.proxy.shape[1]), "alarms": [],
        }
        for name in episodes_.EPISODE_COUNTS:  # an episode look's mean calls and turns
            if look.counts is not None and name in look.counts:
                entry[name] = float(np.nanmean(look.counts[name]))
        if self.endorsed:
            entry["gap_adjusted"] = res["gap_adjusted"]
            self._payments = {name: {"payment": float(p), "read": how}
                              for name, p, how in zip(self.endorsed, res["payments"], res["payments_read"])}
        if res["scan"] is not None:
            self._scan = {**res["scan"], "step": look.step}
            self._scan.pop("per_prompt", None)
        if res["format"] is not None:
            self._format = {**res["format"], "step": look.step}
            self._format.pop("per_prompt", None)
        checks_out = self._gap_checks(look, res, entry["alarms"])
        self._scan_alarms(look, res, entry["alarms"])
        if res["format"] is not None:
            checks_out["format"] = {k: v for k, v in res["format"].items() if k not in ("per_prompt", "markers")}
        return clean({**entry, "checks": clean(checks_out)})

    def _gap_checks(self, look: checks.Look, res: checks.CheckResults, alarms: list[str]) -> dict[str, dict[str, Any]]:
        """The look's divergence, gold-decline, length and KL results as its entry keeps them (without their
        per-prompt effects), naming each that fired in ``alarms`` and recording the alarm the first time; the length
        result is also kept for the summary."""
        found: tuple[tuple[str, Mapping[str, Any] | None], ...] = (
            ("divergence", res["divergence"]), ("gold_decline", res["gold_decline"]), ("length", res["length"]),
            ("kl", res["kl"]))
        out: dict[str, dict[str, Any]] = {}
        for kind, result in found:
            if result is None:
                continue
            r = out[kind] = {k: v for k, v in result.items() if k != "per_prompt"}
            if r["fired"]:
                alarms.append(kind)
                if kind not in self._fired:
                    self._fired.add(kind)
                    self._add_alarm(kind, look.step, r, result.get("per_prompt"), self._strongest())
        if res["length"] is not None:
            self._length = {**res["length"], "step": look.step}
            self._length.pop("per_prompt", None)
        return out

    def _scan_alarms(self, look: checks.Look, res: checks.CheckResults, alarms: list[str]) -> None:
        """The feature scan's and format check's flags: each names its alarm in ``alarms`` while it flags, and a
        feature or marker flagged for the first time records an alarm with its detail and prompts."""
        found: tuple[tuple[str, Mapping[str, Any] | None, set[str]], ...] = (
            ("feature", res["scan"], self._flagged), ("format", res["format"], self._markers))
        for kind, r, flagged in found:
            if r is None:
                continue
            if r["flagged"]:
                alarms.append(kind)
            new = [f for f in r["flagged"] if f not in flagged]
            if not new:
                continue
            flagged.update(new)
            detail = [d for d in r.get("flagged_detail", r.get("detail", [])) if d["feature"] in new]
            per_prompt = r.get("per_prompt")
            if isinstance(per_prompt, dict):
                per_prompt = per_prompt.get(new[0])
            self._add_alarm(kind, look.step, {"features": new, "detail": detail, "alpha": r.get("alpha"),
                                              "completions": r.get("completions")}, per_prompt, detail[:1] or None)

    def _strongest(self) -> list[StrongestFeature] | None:
        """The feature or format marker the latest scan (or format check) found the proxy paying most for."""
        scan, marks = self._scan, self._format
        found: tuple[tuple[Sequence[checks.FeatureRow], float | None], ...] = (
            ((scan.get("top") or []) if scan else [], scan.get("alpha") if scan else None),
            ((marks.get("markers") or []) if marks else [], marks.get("alpha") if marks else None))
        for rows, alpha in found:
            ranked = sorted((r for r in rows if r.get("payment") is not None and np.isfinite(r["z"])
                             and r["payment"] > 0), key=lambda r: -r["z"])
            if ranked:
                return [{**ranked[0], "strongest": True, "alpha": alpha}]
        return None

    def _add_alarm(self, kind: str, step: int, numbers: dict[str, Any], per_prompt: np.ndarray | None,
                   feature: list[checks.FeatureRow] | list[StrongestFeature] | None) -> None:
        """Record an alarm with what to look at: the feature involved, the length change and the prompts."""
        base = self._looks[: max(1, min(self.window, len(self._looks) - 1))]
        before = float(np.nanmean(np.stack([lk.length for lk in base])))
        after = float(np.nanmean(self._looks[-1].length))
        prompts: list[PromptEffect] = []
        if per_prompt is not None:
            effect = np.asarray(per_prompt, dtype=float)
            for i in np.argsort(-np.where(np.isfinite(effect), effect, -np.inf), kind="stable"):
                if len(prompts) == defaults.MONITOR_PROMPTS_SHOWN or not np.isfinite(effect[i]):
                    break
                prompts.append({"prompt": prompt_text(self._held[i].prompt), "effect": float(effect[i])})
        look_at: LookAt = {"feature": feature[0] if feature else None, "length_before": before, "length_after": after,
                   "length_change_pct": 100 * (after / before - 1) if before > 0 else None, "prompts": prompts}
        alarm = {"kind": kind, "step": int(step), "evaluation": len(self._looks) - 1,
                 **{k: v for k, v in numbers.items() if k != "fired"}, "look_at": look_at}
        alarm["message"] = alarm_message(clean(alarm), self._length_unit)
        self.alarms.append(clean(alarm))

    # ------------------------------------------------------- run and summary

    def _log(self, entry: HistoryEntry) -> None:
        if self.run is None or not self._primary:
            return
        metrics = {f"monitor/{key}": entry.get(key) for key in ("proxy", "gold", "gap", "gap_adjusted", "length", "kl",
                                                                *episodes_.EPISODE_COUNTS)}
        div = entry["checks"].get("divergence")
        if div:
            metrics["monitor/divergence"] = div.get("change")
        metrics["monitor/alarms"] = float(len(self.alarms))
        metrics = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and np.isfinite(v)}
        try:
            self.run.log(step=entry["step"], **metrics)
        except Exception:  # the run's troubles are never the training's
            self._errors.run += 1

    def _note(self) -> None:
        if self.run is None or not self._primary:
            return
        try:
            self.run.note(monitor=self.summary())
        except Exception:
            self._errors.run += 1

    def summary(self) -> MonitorSummary:
        """The curve points, the alarms, the last feature scan and where training stopped (JSON-able)."""
        curve = [{key: e.get(key) for key in ("step", "proxy", "gold", "gap", "gap_adjusted", "length", "kl",
                                              *episodes_.EPISODE_COUNTS) if key in e} for e in self.history]
        return clean({
            "evaluations": len(self.history),
            "curve": curve,
            "alarms": [dict(a) for a in self.alarms],
            "scan": self._scan,
            "format": self._format,
            "length": self._length,
            "endorsed": self._payments,
            # the older sentence for divergence and gold decline, which run records and pages already read
            "divergence": "on" if self.armed["divergence"] == arming.ARMED else self.armed["divergence"],
            "kl": self._kl_status,
            "armed": dict(self.armed),
            "length_unit": self._length_unit,
            "stopped": self._stopped,
            "settings": {"every": self.every, "k": self.k, "n_prompts": len(self._held), "window": self.window,
                         "delta": self.delta, "length_pct": self.length_pct, "kl_budget": self.kl_budget,
                         "endorsed": list(self.endorsed), "stop_on": list(self.stop_on),
                         "format_shift": defaults.MONITOR_FORMAT_SHIFT, "length_shift": defaults.MONITOR_LENGTH_SHIFT,
                         "length_bins": defaults.MONITOR_LENGTH_BINS, "length_tail": defaults.MONITOR_LENGTH_TAIL,
                         "length_tail_alpha": defaults.MONITOR_LENGTH_TAIL_ALPHA, "alpha": defaults.MONITOR_ALPHA,
                         "scan_alpha": defaults.MONITOR_SCAN_ALPHA},
            "errors": {"run": self._errors.run, "gold": self._errors.gold, "evaluate": list(self._errors.evaluate)},
        })

    # ------------------------------------------------------------ callback

    # Every process evaluates (the same seed gives the same samples, so every rank takes the same
    # decision to stop); only the main process writes to the run.

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        self._state = state
        self._primary = bool(getattr(state, "is_world_process_zero", True))
        try:
            self._prepare_reference(model)
        except Exception as exc:
            self._record_error(exc)
        if state.global_step == 0:
            return self._look(state, control, model, processing_class, kwargs)
        return control

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        self._state = state
        self._primary = bool(getattr(state, "is_world_process_zero", True))
        if state.global_step > 0 and state.global_step % self.every == 0:
            return self._look(state, control, model, processing_class, kwargs)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        self._note()
        return control

    def _look(self, state, control, model, processing_class, kwargs):
        tokenizer = processing_class if processing_class is not None else kwargs.get("tokenizer")
        if tokenizer is not None and not hasattr(tokenizer, "apply_chat_template") and hasattr(tokenizer, "tokenizer"):
            tokenizer = tokenizer.tokenizer
        try:
            entry = self.evaluate(state.global_step, model=model, tokenizer=tokenizer)
        except Exception as exc:  # a failed look is reported, never raised into the training loop
            self._record_error(exc)
            return control
        stop = [kind for kind in entry["alarms"] if kind in self.stop_on or "any" in self.stop_on]
        if stop and self._stopped is None:
            alarm = next((a for a in reversed(self.alarms) if a["kind"] == stop[0]), {})
            self._stopped = {"step": int(state.global_step), "kind": stop[0],
                             "reason": alarm.get("message", stop[0])}
            control.should_training_stop = True
            self._note()
        return control

    def _record_error(self, exc: Exception) -> None:
        message = f"{type(exc).__name__}: {exc}"
        if message not in self._errors.evaluate:
            self._errors.evaluate.append(message)
            warnings.warn(f"HackMonitor could not evaluate: {message}; training goes on", MonitorWarning, stacklevel=3)


def _define_hack_monitor() -> type:
    """HackMonitor proper: the monitor with transformers' TrainerCallback as a base.

    Built on first use so importing this module does not import transformers.
    """
    from transformers import TrainerCallback

    cls = type("HackMonitor", (_HackMonitor, TrainerCallback),
               {"__doc__": _HackMonitor.__doc__, "__module__": __name__, "__qualname__": "HackMonitor"})
    return cls


def __getattr__(name: str) -> Any:
    if name == "HackMonitor":
        value = globals()["HackMonitor"] = _define_hack_monitor()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
