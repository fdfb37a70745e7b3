"""A Hugging Face Trainer job as its documentation shows one, no ddp_profile line: a small BERT for sequence
classification built from a config (no download), a map-style dataset of token ids, TrainingArguments with a linear
warm-up schedule, step checkpoints (`checkpoint-N/` folders: weights, optimizer.pt, scheduler.pt,
rng_state_<rank>.pth, trainer_state.json) and dropout, under torchrun with Gloo on the CPU.

With every default of transformers 5 its gradient is twice the single-process gradient of the same global batch:
average_tokens_across_devices multiplies the loss by the number of processes for a model that takes loss kwargs,
and BERT's sequence-classification loss ignores num_items_in_batch (numerics.reference names it). With
--no-average-tokens the job is correct and every check must pass it.

--model gpt2: a small GPT-2 language model instead, whose head shares its weight with the token embedding
(tie_word_embeddings, the default of most language models): one parameter under two names, stored once by
save_pretrained's safetensors. Its loss takes num_items_in_batch, so every default is correct for it.

    torchrun --nproc-per-node 2 hf_trainer_job.py --out DIR [--model bert|gpt2] [--no-average-tokens] [--resume DIR]
                                                  [--plant NAME]

Planted:
  save-only-model    save_only_model=True: the checkpoint folders hold the weights alone, not resumable
  accumulate         gradient_accumulation_steps=2 (a correct job)
  unfreeze-late      the transformer blocks frozen when the Trainer builds DDP and the optimizer, then unfrozen by a
                     callback at step 4 (a schedule of gradual unfreezing done too late): their gradients are never
                     averaged across ranks and no optimizer steps them
"""
import argparse

import torch
from torch.utils.data import Dataset
from transformers import (BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel, Trainer,
                          TrainerCallback, TrainingArguments)


class Tokens(Dataset):
    """Sequences of 12 token ids; the label is whether token 7 occurs in the first half."""

    def __init__(self, n: int, causal: bool) -> None:
        self.causal = causal
        g = torch.Generator().manual_seed(11)
        self.ids = torch.randint(1, 64, (n, 12), generator=g)
        self.labels = (self.ids[:, :6] == 7).any(1).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int):
        if self.causal:  # next-token prediction: the labels are the ids (the model shifts them)
            return {"input_ids": self.ids[i], "attention_mask": torch.ones(12, dtype=torch.long),
                    "labels": self.ids[i]}
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(12, dtype=torch.long),
                "labels": self.labels[i]}


class UnfreezeAt(TrainerCallback):
    """Gradual unfreezing as tutorials show it: requires_grad set again on frozen parameters mid-run."""

    def __init__(self, params, step: int) -> None:
        self.params, self.step = params, step

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            for p in self.params:
                p.requires_grad_(True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--resume", default=None)
    ap.add_argument("--plant", default="")
    ap.add_argument("--epochs", type=float, default=2)
    ap.add_argument("--no-average-tokens", action="store_true")
    ap.add_argument("--model", choices=["bert", "gpt2"], default="bert")
    a = ap.parse_args()
    torch.manual_seed(0)
    if a.model == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=2, n_positions=16))
        assert model.lm_head.weight is model.transformer.wte.weight  # tied
    else:
        model = BertForSequenceClassification(BertConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=16, num_labels=2))
    args = TrainingArguments(
        output_dir=a.out, per_device_train_batch_size=8, num_train_epochs=a.epochs, learning_rate=5e-4,
        warmup_steps=4, lr_scheduler_type="linear", save_strategy="steps", save_steps=12, logging_steps=10,
        report_to=[], use_cpu=True, ddp_backend="gloo", seed=3, dataloader_num_workers=0,
        gradient_accumulation_steps=2 if a.plant == "accumulate" else 1,
        save_only_model=a.plant == "save-only-model", disable_tqdm=True,
        average_tokens_across_devices=not a.no_average_tokens)
    callbacks = []
    if a.plant == "unfreeze-late":
        blocks = [p for n, p in model.named_parameters() if ".h." in n or ".encoder." in n]
        for p in blocks:
            p.requires_grad_(False)
        callbacks.append(UnfreezeAt(blocks, 4))
    trainer = Trainer(model=model, args=args, train_dataset=Tokens(384, causal=a.model == "gpt2"),
                      callbacks=callbacks)
    trainer.train(resume_from_checkpoint=a.resume)


if __name__ == "__main__":
    main()
