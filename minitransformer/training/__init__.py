"""Training machinery: the loop, its loss and schedules, checkpoints, weight
averaging, multi-process training, the history it records and the book's
presets.

The Transformer itself lives at the top of the package; nothing here is
needed to build or run a model, only to train one.
"""

from .averaging import ExponentialMovingAverage
from .checkpoint import CHECKPOINT_FORMAT, build_model, load_checkpoint, save_checkpoint
from .config import TrainConfig
from .device import AMP_MODES, autocast_for, native_bf16, pick_device, precision
from .history import History
from .loop import StepReport, Trainer, TrainingDivergedError, fit, make_optimizer
from .loss import evaluate_accuracy, evaluate_loss, label_smoothed_cross_entropy
from .presets import (
    CPU_DATA,
    CPU_MODEL,
    CPU_TOKENIZERS,
    CPU_TRAINING,
    cpu_model_config,
    cpu_train_config,
)
from .schedule import SCHEDULES, learning_rate, paper_noam_lr
