"""Supervised fine-tuning: what is SFT-only and neither a launcher nor code that runs inside verl.

Here: :mod:`agent_tune.sft.rows` (conversations -> ``input_ids`` + ``loss_mask``, tokenised exactly as the RL
rollout tokenises the same episode) and :mod:`agent_tune.sft.convert` (``agent-tune sft-data``: other projects'
SFT data, ToolRL's ``rlla_sft`` and the tau2 pipeline's seed jsonl, as ``agent-tune sft`` rows).

The other pieces, one line each:

* the launcher, ``agent-tune sft``: :mod:`agent_tune.launch.sft`;
* the dataset verl's SFT trainer loads (``data.custom_cls``): :mod:`verl_ext.sft_dataset`;
* rejection-sampling fine-tuning rows (``agent-tune eval --sft-out``): :mod:`agent_tune.eval.rft`;
* the configs: ``config/agent_tune_sft.yaml``, ``config/agent_tune_sft_cpu.yaml``, ``config/sft_format/``;
* the dataset builders: ``data_preprocess/sft_synthetic.py``, ``data_preprocess/retool_sft_synthetic.py``;
* the guide: ``docs/sft.md``.
"""
