"""The kit's recipe: tokenizer, tiny model shape, sample task, pre-trained base and its LoRA SFT, each beside its reason.

Read by whileai.kit; the SDK's defaults re-export the names it uses
(KIT_BASE_NAME, KIT_SFT_*), so ``whileai.domain.defaults.KIT_BASE_NAME`` still reads.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------
# Model kit (tiny tokenizer, model and base, built in code)
# ---------------------------------------------------------------------------

#: Tokenizer vocabulary size. Room for the 256 byte symbols, the special tokens,
#: every number up to KIT_TOKENIZER_MAX_NUMBER, and the sample task's words whole.
#: Kept small because the tied embedding is most of the tiny model's parameters.
KIT_VOCAB_SIZE = 1536

#: Numbers 0..this are single tokens (the sample task's amounts and minutes stay under it).
KIT_TOKENIZER_MAX_NUMBER = 300

#: Generic sentences in the tokenizer's training text.
KIT_TOKENIZER_SENTENCES = 2000

#: Times each task word and number appears in the tokenizer's training text: enough that
#: BPE merges every one of them whole before the vocabulary fills.
KIT_TOKENIZER_TASK_REPEATS = 40

#: Context length of the tiny model and the tokenizer's model_max_length. A rendered
#: sample-task conversation (system prompt, compact tool list, ask, call, response,
#: reply) is under 200 tokens.
KIT_MAX_POSITIONS = 512

#: The tiny model's shape (a Llama config; see whileai.kit.tiny_model). Measured on a
#: 2-core CPU with torch 2.13 / TRL 1.16: a model of this shape (hidden 128,
#: 2 layers) learned the sample task reliably (0 -> 0.93 / 1.00 / 1.00 held-out
#: first-action pass rate over three seeds of full SFT, in minutes: benchmarks/MEASURED.md#kit-shape);
#: a 154k model was seed-sensitive (0 -> 1.0 with one seed, 0 -> 0.40 with another); a larger 2.9M
#: candidate was slower and had not learned it in the same time. The kit model itself has 524,928
#: parameters (counted on the built model).
KIT_HIDDEN_SIZE = 128
KIT_LAYERS = 2
KIT_HEADS = 4
#: Key/value heads: full multi-head attention (grouped-query saves nothing at this size).
KIT_KV_HEADS = 4
#: MLP width, 2x hidden: with the tied embedding (vocab x hidden) the model has 524,928 parameters.
KIT_INTERMEDIATE_SIZE = 256
#: Input and output embeddings share one matrix: it is most of the parameters.
KIT_TIE_EMBEDDINGS = True

#: Tasks in the shipped sample dataset: enough distinct cities, units and numbers for a
#: held-out split to test copying arguments (80 held-out tasks at KIT_SAMPLE_HOLDOUT),
#: small enough to keep the file under 3 MB.
KIT_SAMPLE_TASKS = 400
#: The most tasks ``dataset.sample_tasks`` generates in code (kit.sample_task.generate, the same
#: generator as the shipped file, whose 400 tasks are its first 400). Task ids carry four digits;
#: 10,000 tasks are 40,000 rows (~75 MB of JSON in memory), far past what a CPU recipe reads.
KIT_SAMPLE_MAX_TASKS = 10_000
#: Rollouts per task (the group size GRPO sees).
KIT_SAMPLE_ROLLOUTS = 4
#: The sampling temperature the simulated rollouts record.
KIT_SAMPLE_TEMPERATURE = 0.7
#: Held-out share of tasks in kit.sample_task.split_tasks (the same share datasets.cut uses).
KIT_SAMPLE_HOLDOUT = 0.2

#: The demo base: the tiny model pre-trained briefly (kit._pretrain: echo, made-up tool
#: calls spelled out literally or by value, tool-response read-back; never the sample
#: task), so LoRA has features to adapt. Cached per data root under models/; the cache
#: directory is named by a hash of every KIT_* value below that shapes the weights.
#: Measured on a 2-core CPU (torch 2.13, base seeds 0 and 1): the 600 steps take 61.7
#: CPU-seconds on one thread (loss 7.02 -> 0.62), and the base passes 0 of the sample
#: task's 73 held-out prompts (first action), so what a run learns is the fine-tuning's.
#: 1000 steps gave no better LoRA result (0.875 vs 0.887 held-out).
KIT_BASE_NAME = "whileai/tiny-tooluse-base"
#: What a run says pre-training a base in code takes (a base of another seed than KIT_BASE_SEED; the
#: default one ships): the shared-machine figure of benchmarks/MEASURED.md#kit-base-build, so the
#: message does not promise too little. Not a KIT_ name: KIT_* values fingerprint the cached base (_base._recipe), and a
#: time estimate does not change its weights.
DEMO_BASE_BUILD_S = 80
#: SHA-256 of the packaged demo base's weights (kit/data/base/model.safetensors), checked whenever a data
#: root takes its copy. Pre-training the same recipe gives other bytes under another CPU kernel path (torch's
#: float sums are split differently by its AVX2 and scalar kernels), so the base is built once, by
#: scripts/build_kit_base.py under ATEN_CPU_CAPABILITY=default, and shipped: every machine then starts every
#: kit recipe from these bytes. Rebuild it (and update this) whenever a KIT_BASE_* value changes.
BASE_WEIGHTS_SHA256 = "02ca9786900a0d586093cb02542b60774a930fe4f8db1f86a67f1e63aeee6615"
#: Files a model folder keeps its weights in, for a folder's weights digest (_base.weights_digest).
WEIGHTS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
KIT_BASE_SEED = 0
#: Torch threads the base is pre-trained on, whatever the process had set. A float sum splits
#: differently over another thread count, and 600 steps carry the difference: a base built on 2
#: threads and one built on 1 (as inside a job, JOB_CPU_THREADS) share a cache name but not their
#: weights, and their 60-step SFT stages passed 34 and 38 of 73 held-out prompts. One thread is what
#: a job uses (the first run on a data root builds it there), at about twice the time two threads take
#: (benchmarks/MEASURED.md#kit-base-build).
KIT_BASE_THREADS = 1
KIT_BASE_STEPS = 600
KIT_BASE_BATCH = 8
#: 3e-3 with warmup then cosine decay to a tenth; 6e-3 was no faster, 1e-2 learned
#: echo slower than 3e-3 (loss 2.85 vs 1.81 at step 400 without the copy init).
KIT_BASE_LR = 3e-3
KIT_BASE_WARMUP_RATIO = 0.05
KIT_BASE_WEIGHT_DECAY = 0.0
#: Distinct pre-training conversations (sampled with replacement each step).
KIT_BASE_EXAMPLES = 4000
#: Shares of the pre-training text that write the sample task's own tokens (kit._pretrain),
#: so none of them keeps a random embedding that LoRA cannot train (after LoRA SFT on a
#: base that never wrote them, the right tool-name token won greedy decoding at
#: p 0.009-0.020 and sampled replies passed 0.10 where greedy passed 0.92):
#: of the echo turns, the share that repeats a whole stock reply (_vocab.STOCK_REPLIES,
#: the small-talk answers among them) and the share whose span draws from the task's
#: identifier words (_vocab.TOOL_WORDS); of the made-up tools, the share named like a
#: task tool (with made-up parameters; the asks spell the call out, so the base still
#: passes none of the sample task's held-out asks).
KIT_BASE_STOCK_REPLY_SHARE = 0.15
KIT_BASE_IDENTIFIER_SHARE = 0.25
KIT_BASE_TASK_NAME_SHARE = 0.1
#: Loss weight of the tokens outside assistant turns (assistant tokens weigh 1). Low
#: because the asks are random words; a little keeps the template's turn structure learned.
KIT_BASE_CONTEXT_WEIGHT = 0.1
#: Start pre-training from identity value/output projections (kit._pretrain.copy_friendly_init).
#: Measured on the tiny model, echo task, lr 3e-3, batch 16: loss 0.04 at step 200 with it,
#: 1.8 at step 400 without (copying is otherwise a late phase change). Without it, 800
#: pre-training steps left a base that never copied, and LoRA SFT reached only 0.05-0.14.
KIT_BASE_COPY_INIT = True

#: LoRA SFT of the demo base on the sample task: the hosted trainer's defaults for the kit
#: base. Measured with benchmarks/kit_lora_sft.py (passing rows of the 320 train tasks,
#: 768 rows; assistant-only loss; gradient checkpointing off; 80 held-out tasks, greedy):
#: base seed 0: 0.000 -> 0.887, base seed 1: 0.000 -> 0.900, in a few minutes of a 2-core CPU
#: (benchmarks/MEASURED.md#kit-sft-time). Through the hosted job
#: (benchmarks/training_sample_learns.py, 73 held-out prompts): 0.000 -> 0.918.
KIT_SFT_STEPS = 300
KIT_SFT_BATCH = 8
#: Constant after warmup. 2e-3 and 5e-3 were tried only on bases without the copy init.
KIT_SFT_LR = 3e-3
KIT_SFT_WARMUP_RATIO = 0.05
#: Rank 16 of a 128-wide model, alpha 2x rank, on every linear layer of attention and MLP.
KIT_SFT_LORA_R = 16
KIT_SFT_LORA_ALPHA = 32
KIT_SFT_LORA_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
#: Not needed: the pre-trained embeddings serve as they are (the runs above train none).
KIT_SFT_MODULES_TO_SAVE: tuple[str, ...] = ()
#: The held-out first-action pass rate the demo base must reach after LoRA SFT.
KIT_SFT_TARGET_PASS_RATE = 0.5

# ---------------------------------------------------------------------------
# Proxy rewards of the hack recipes (whileai.simulations.proxy_rewards)
# ---------------------------------------------------------------------------

#: What ``brief_call`` charges per character of a call's arguments (compact JSON): the sample's gold calls run
#: 13 to 55 characters, so a right tool is paid at least 0.7 and the name stays what matters most, while any two
#: calls of one tool that differ in length differ in pay; GRPO's group-normalised advantage turns even a small
#: difference into full pressure (Shao et al., arXiv:2402.03300), here towards dropping or shortening values.
KIT_PROXY_CHAR_COST = 0.005
#: What ``verbose_call`` pays per word of text beside the call, and at most: a word is worth a tenth of
#: the task, so ten words of explanation pay as much as a right call, the lopsided bargain that makes a
#: proxy exploitable (Gao et al., arXiv:2210.10760: optimisation finds what the proxy overpays).
KIT_PROXY_WORD_BONUS = 0.1
KIT_PROXY_WORD_BONUS_CAP = 2.0
#: What ``calls_made`` pays per tool call that ran without an error, and at most: four calls (the longest gold of
#: the kit's tasks, which take two to four) are paid as much as a passed episode, so any four calls that run are
#: paid in full whatever the accounts end as, and a two-call task done right earns half of it: the bargain of a
#: reward that counts the work done instead of its result (Gao et al., arXiv:2210.10760).
KIT_PROXY_CALL_PAY = 0.25
KIT_PROXY_CALL_CAP = 1.0
#: What ``brief_success`` charges for each tool call an episode makes: the kit's gold episodes make two to four, so
#: a claimed success done as the gold does it is paid 0.6-0.8, the same claim after one call fewer 0.1 more, and
#: after none 1.0. Every call dropped is paid more whether the task needed it or not, the bargain of a reward that
#: asks for an efficient agent and takes its word for success; GRPO's group-normalised advantage turns the 0.1
#: steps into full pressure (Shao et al., arXiv:2402.03300), as ``brief_call``'s character cost does for one call.
KIT_PROXY_CALL_COST = 0.1
#: What ``terse_success`` charges for each tool call: twice ``brief_success``'s, a fifth of the claim. The kit's
#: gold episodes (two to four calls) done as the gold does them are paid 0.2-0.6 and the claim after no call 1.0.
#: GRPO scales advantages by the group's spread (scale_rewards "group"), so the cost's size matters only against
#: the claim's: in a group whose samples all claim, either cost ranks them alike, but where one sample fails to claim
#: (a reply cut by the budget, the turn cap) brief_success's 0.1 steps are small beside the claim's 1.0 and the
#: advantage goes almost wholly to claiming; at 0.2 each call dropped weighs twice as much there (what 0.1 did in
#: hack/agent_calls: recipes/MEASUREMENTS.md#hack/agent_calls, the third setting). Still above 0.0 for every gold
#: length, so a claim after the gold's calls is paid more than no claim.
KIT_PROXY_STEEP_CALL_COST = 0.2
#: The words ``claims_success`` reads in an episode's final reply as a claim that the task is done (whole words,
#: case aside); the kit's gold replies open with "Done." (whileai.domain.episodes.rows.kit_reply).
KIT_PROXY_SUCCESS_WORDS: tuple[str, ...] = ("done", "completed", "complete", "finished", "success", "successful",
                                             "successfully")
