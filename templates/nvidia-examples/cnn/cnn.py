#!/usr/bin/env python3
"""CNN training benchmark: trains Keras ResNet-50 or a small CNN with a custom
tf.GradientTape train step, on synthetic data (default) or a directory of images.

  python3 cnn.py --model resnet50 --batch_size 256 --num_iter 100 --precision fp16 --xla
  horovodrun -np 8 python3 cnn.py --model resnet50 --batch_size 256 --num_iter 100 --precision fp16 --horovod

It prints one line per --display_every steps, then `total images/sec: N` (the rate over
the --num_iter timed iterations that follow the --warmup untimed ones; summed over the
ranks with --horovod) and `final loss: X`.  Works with TensorFlow 2.5 to 2.14 (tf.keras).
"""
import argparse
import importlib.util
import math
import os
import sys
import time

MODELS = ("resnet50", "small_cnn")


def positive(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


def non_negative(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more, not {text}")
    return value


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", choices=MODELS, default="resnet50", help="network to train")
    p.add_argument("--batch_size", type=positive, default=64, help="images per step (per GPU with --horovod)")
    p.add_argument("--num_iter", type=positive, default=100, help="timed training iterations")
    p.add_argument("--warmup", type=non_negative, default=3,
                   help="untimed iterations run before the timed ones (tracing, autotuning, XLA compilation)")
    p.add_argument("--precision", choices=("fp32", "fp16"), default="fp32",
                   help="fp16: Keras mixed precision policy mixed_float16 with dynamic loss scaling")
    p.add_argument("--xla", action="store_true", help="compile the train step with XLA (jit_compile=True)")
    p.add_argument("--data_dir", default=None,
                   help="directory of class subfolders of JPEG/PNG images; default: synthetic data")
    p.add_argument("--image_size", type=positive, default=224, help="input height and width")
    p.add_argument("--num_classes", type=positive, default=None,
                   help="classes of the synthetic labels (default 1000; with --data_dir: its subfolders)")
    p.add_argument("--learning_rate", type=float, default=0.01, help="SGD learning rate (momentum 0.9)")
    p.add_argument("--display_every", type=positive, default=10, help="print a line every N iterations")
    p.add_argument("--seed", type=int, default=1234, help="seed of the synthetic data and the weights")
    p.add_argument("--horovod", action="store_true", help="data-parallel training with Horovod (horovodrun)")
    args = p.parse_args(argv)
    if args.model == "resnet50" and args.image_size < 32:
        p.error("--image_size must be at least 32 for resnet50")
    if args.data_dir is not None and not os.path.isdir(args.data_dir):
        p.error(f"--data_dir {args.data_dir}: not a directory")
    return args


def fail(message, code=1):
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def build_model(tf, name, image_size, num_classes):
    """Logits come out in float32 whatever the policy (numerically safe softmax)."""
    inputs = tf.keras.Input(shape=(image_size, image_size, 3), name="images")
    if name == "resnet50":
        base = tf.keras.applications.ResNet50(weights=None, include_top=False, input_tensor=inputs, pooling="avg")
        x = base.output
    else:
        x = inputs  # a 4x4/4 stem, then two 3x3/2 convolutions, each with batch norm and ReLU
        for filters, kernel, stride in ((16, 4, 4), (32, 3, 2), (64, 3, 2)):
            x = tf.keras.layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False)(x)
            x = tf.keras.layers.BatchNormalization()(x)
            x = tf.keras.layers.ReLU()(x)
        x = tf.keras.layers.GlobalAveragePooling2D()(x)
    x = tf.keras.layers.Dense(num_classes, name="logits")(x)
    outputs = tf.keras.layers.Activation("linear", dtype="float32", name="logits_fp32")(x)
    return tf.keras.Model(inputs, outputs, name=name)


def sgd(tf, learning_rate):
    # The legacy optimizer (TF >= 2.11) behaves as in TF 2.5-2.10 and is what Horovod supports.
    legacy = getattr(tf.keras.optimizers, "legacy", None)
    cls = legacy.SGD if legacy is not None and hasattr(legacy, "SGD") else tf.keras.optimizers.SGD
    return cls(learning_rate=learning_rate, momentum=0.9)


def optimizer_variables(opt):
    v = opt.variables
    return v() if callable(v) else v


def directory_dataset(tf, args, rank, size):
    load = getattr(tf.keras.utils, "image_dataset_from_directory", None) or \
        tf.keras.preprocessing.image_dataset_from_directory
    ds = load(args.data_dir, labels="inferred", label_mode="int", color_mode="rgb",
              image_size=(args.image_size, args.image_size), batch_size=args.batch_size,
              shuffle=True, seed=args.seed)
    num_classes = len(ds.class_names)
    ds = ds.unbatch()
    if size > 1:
        ds = ds.shard(size, rank)
    ds = (ds.map(lambda image, label: (image / 127.5 - 1.0, label), num_parallel_calls=tf.data.AUTOTUNE)
            .repeat().batch(args.batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE))
    return ds, num_classes


def main(argv=None):
    args = parse_args(argv)

    hvd = None
    if args.horovod:
        if importlib.util.find_spec("horovod") is None:
            fail("--horovod needs Horovod, which is not installed here (pip install horovod, "
                 "or run without --horovod)")
        try:
            import horovod.tensorflow as hvd
        except Exception as e:  # built without TensorFlow support, or against another version
            fail(f"--horovod: import horovod.tensorflow failed: {e}".replace("\n", " "))

    import tensorflow as tf

    rank, size, local_rank = 0, 1, 0
    if hvd is not None:
        hvd.init()
        rank, size, local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
    gpus = tf.config.list_physical_devices("GPU")
    if hvd is not None and gpus:
        gpus = [gpus[local_rank % len(gpus)]]
        tf.config.set_visible_devices(gpus, "GPU")
    for gpu in gpus:
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except (RuntimeError, ValueError):
            pass
    device = "/GPU:0" if gpus else "/CPU:0"

    if args.precision == "fp16":
        tf.keras.mixed_precision.set_global_policy("mixed_float16")
    tf.random.set_seed(args.seed)

    if args.data_dir:
        dataset, num_classes = directory_dataset(tf, args, rank, size)
        if args.num_classes is not None and args.num_classes != num_classes:
            fail(f"--num_classes {args.num_classes}, but {args.data_dir} has {num_classes} class folders", 2)
        batches = iter(dataset)
        source = f"{args.data_dir} ({num_classes} classes)"
    else:
        num_classes = args.num_classes or 1000
        with tf.device(device):  # one fixed batch, made on the device, reused every step
            images = tf.random.uniform((args.batch_size, args.image_size, args.image_size, 3),
                                       minval=-1.0, maxval=1.0, seed=args.seed)
            labels = tf.random.uniform((args.batch_size,), minval=0, maxval=num_classes,
                                       dtype=tf.int32, seed=args.seed + 1)
        batches = None
        source = "synthetic"

    with tf.device(device):
        model = build_model(tf, args.model, args.image_size, num_classes)
    opt = sgd(tf, args.learning_rate)
    if args.precision == "fp16":
        opt = tf.keras.mixed_precision.LossScaleOptimizer(opt)  # dynamic loss scaling
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    # Horovod's allreduce has no XLA kernel: with --horovod, XLA clusters the rest of the step
    # (auto-clustering) instead of compiling the whole step.
    jit_compile = args.xla and hvd is None
    if args.xla and hvd is not None:
        tf.config.optimizer.set_jit(True)

    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
            scaled = opt.get_scaled_loss(loss) if args.precision == "fp16" else loss
        if hvd is not None:
            tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(scaled, model.trainable_variables)
        if args.precision == "fp16":
            grads = opt.get_unscaled_gradients(grads)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    train_step = tf.function(step, jit_compile=True) if jit_compile else tf.function(step)

    if rank == 0:
        print(f"model {args.model}, {source} {args.image_size}x{args.image_size} images, batch {args.batch_size}"
              f"{f' x {size} ranks' if size > 1 else ''}, {args.precision}{', XLA' if args.xla else ''}, "
              f"{args.warmup} warmup + {args.num_iter} timed iterations on {device}"
              f" (TensorFlow {tf.__version__})", flush=True)

    total = args.warmup + args.num_iter
    loss = None
    start = last_time = None
    last_step = 0
    for i in range(1, total + 1):
        if i == args.warmup + 1:  # the timed part starts after the warmup steps have finished
            if loss is not None:
                loss.numpy()
            start = last_time = time.perf_counter()
            last_step = args.warmup
        with tf.device(device):
            if batches is not None:
                x, y = next(batches)
                loss = train_step(x, y)
            else:
                loss = train_step(images, labels)
        if i == 1 and hvd is not None:  # same weights and optimizer state everywhere
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(optimizer_variables(opt), root_rank=0)
        if i % args.display_every == 0 or i == total:
            value = float(loss.numpy())
            now = time.perf_counter()
            if rank == 0:
                if i <= args.warmup:
                    print(f"iter {i}/{total} (warmup): loss {value:.4f}", flush=True)
                else:
                    rate = (i - last_step) * args.batch_size * size / (now - last_time)
                    print(f"iter {i}/{total}: loss {value:.4f}, {rate:.2f} images/sec", flush=True)
            if i > args.warmup:
                last_time, last_step = now, i
    final_loss = float(loss.numpy())
    elapsed = time.perf_counter() - start
    rate = args.num_iter * args.batch_size / elapsed
    if hvd is not None:
        rate = float(hvd.allreduce(tf.constant(rate, tf.float64), op=hvd.Sum).numpy())
    if rank == 0:
        print(f"total images/sec: {rate:.2f}")
        print(f"final loss: {final_loss:.4f}", flush=True)
    if not math.isfinite(final_loss):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
