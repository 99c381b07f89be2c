"""The domain: what whileai knows about rollouts, judges, training records and reward hacking.

Rooms, each named for what it holds (docs/architecture.md draws them):

- ``rows``: rollout rows: reading, keys, actions against the gold, data gates, context fit, BFCL;
- ``judges``: judges, rewards and the reward model that score a row or a completion;
- ``export``: rows to OpenAI-wire or TRL data, with the gates against data that teaches the wrong thing;
- ``monitor``: the HackMonitor, proxy against gold on a live GRPO run;
- ``tracking``: a run's record (points, summary, mirrors) sent to the platform;
- ``report``: the delta report (statistics over two sets of scored rows);
- ``client``: the one way any of them talks to the platform (HTTP, or the embedded transport);
- ``defaults``: every tunable number of the layer, with its reason.

The SDK (``whileai.simulations``) and the jobs (``whileai.jobs``) both import it; it imports neither.
"""
