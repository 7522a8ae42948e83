#!/usr/bin/env python3
"""TF-TRT example: builds a small Keras CNN, saves it as a SavedModel, converts the
SavedModel with TF-TRT (tf.experimental.tensorrt.Converter, i.e. TrtGraphConverterV2),
runs both on the same batch and compares their outputs.

  python3 tftrt.py [--precision FP32|FP16] [--batch_size N] [--num_runs N] [--output_dir DIR]

Without a GPU, or when the TensorRT this TensorFlow was built against cannot be loaded,
it prints one line `skipped: <why>` and exits 0: it checks before converting, because a
conversion attempted without TensorRT can abort the whole process (TF 2.5's TensorRT stub
aborts on a missing symbol).  Works with TensorFlow 2.5 to 2.14.
"""
import argparse
import ctypes
import inspect
import os
import shutil
import sys
import tempfile
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--precision", type=str.upper, choices=("FP32", "FP16"), default="FP32",
                   help="precision of the TensorRT engines")
    p.add_argument("--batch_size", type=int, default=8, help="images per inference batch")
    p.add_argument("--image_size", type=int, default=32, help="input height and width")
    p.add_argument("--num_runs", type=int, default=50, help="timed inference runs of each model")
    p.add_argument("--output_dir", default=None,
                   help="keep the native and converted SavedModels here (default: a temporary directory, removed)")
    args = p.parse_args(argv)
    for name in ("batch_size", "image_size", "num_runs"):
        if getattr(args, name) <= 0:
            p.error(f"--{name} must be positive")
    return args


def skip(reason):
    print(f"skipped: {reason}", flush=True)
    sys.exit(0)


def linked_tensorrt_version():
    """(major, minor, patch) TensorFlow was built against, (0, 0, 0) when it was built
    without TensorRT, None when this TensorFlow cannot say."""
    try:
        from tensorflow.compiler.tf2tensorrt import _pywrap_py_utils as utils
    except ImportError:
        return None
    get = getattr(utils, "get_linked_tensorrt_version", None)
    if get is None:
        return None
    try:
        return tuple(int(x) for x in get())
    except Exception:
        return None


def why_not_tensorrt(tf):
    """None when TF-TRT can run here, else why not. Never calls into TensorRT itself."""
    try:
        from tensorflow.python.compiler.tensorrt import trt_convert  # noqa: F401
    except ImportError as e:
        return f"this TensorFlow {tf.__version__} has no TF-TRT ({e})"
    build = dict(tf.sysconfig.get_build_info()) if hasattr(tf.sysconfig, "get_build_info") else {}
    if build.get("is_tensorrt_build") is False:
        return f"TensorFlow {tf.__version__} was built without TensorRT"
    linked = linked_tensorrt_version()
    if linked is None:
        return (f"cannot tell which TensorRT TensorFlow {tf.__version__} was built against "
                "(no get_linked_tensorrt_version), so TensorRT version unknown")
    if not any(linked):
        return f"TensorFlow {tf.__version__} was built without TensorRT (linked version 0.0.0)"
    wanted = ".".join(map(str, linked))
    major = linked[0]
    loaded = {}
    for lib in (f"libnvinfer.so.{major}", f"libnvinfer_plugin.so.{major}"):
        try:
            loaded[lib] = ctypes.CDLL(lib)
        except OSError as e:
            return f"TensorRT {major} is not usable: TensorFlow {tf.__version__} was built against TensorRT {wanted}, " \
                   f"and {lib} cannot be loaded ({e})"
    try:
        nvinfer = loaded[f"libnvinfer.so.{major}"]
        nvinfer.getInferLibVersion.restype = ctypes.c_int
        version = nvinfer.getInferLibVersion()  # e.g. 7202 (TensorRT 7), 8601 (TensorRT 8)
    except AttributeError:
        version = None
    if version is not None:
        # TensorRT 7/8 encode major*1000 + minor*100 + patch; 10 encodes major*10000 + ...
        found = version // 10000 if version >= 100000 else version // 1000
        if found != major:
            return f"TensorFlow was built against TensorRT {wanted}, but libnvinfer.so.{major} is TensorRT {found} ({version})"
    try:
        from tensorflow.compiler.tf2tensorrt import _pywrap_py_utils as utils
        enabled = getattr(utils, "is_tensorrt_enabled", None)
        if enabled is not None and not enabled():
            return f"TensorFlow {tf.__version__} reports TensorRT {wanted} as not enabled (its libraries do not load)"
    except ImportError:
        pass
    return None


def build_model(tf, image_size):
    tf.random.set_seed(0)
    inputs = tf.keras.Input(shape=(image_size, image_size, 3), name="images")
    x = inputs
    for filters in (16, 32):
        x = tf.keras.layers.Conv2D(filters, 3, strides=2, padding="same", use_bias=False)(x)
        x = tf.keras.layers.BatchNormalization()(x)
        x = tf.keras.layers.ReLU()(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    x = tf.keras.layers.Dense(10, name="logits")(x)
    outputs = tf.keras.layers.Softmax(name="probs")(x)
    return tf.keras.Model(inputs, outputs, name="small_cnn")


def converter(tf, saved_model_dir, precision):
    trt = tf.experimental.tensorrt
    options = dict(precision_mode=precision, max_workspace_size_bytes=1 << 30, minimum_segment_size=3)
    params = inspect.signature(trt.Converter.__init__).parameters
    if "precision_mode" in params:  # TF >= 2.10: keyword arguments
        return trt.Converter(input_saved_model_dir=saved_model_dir, **options)
    return trt.Converter(input_saved_model_dir=saved_model_dir,    # TF 2.5-2.9: ConversionParams
                         conversion_params=trt.ConversionParams(**options))


def count_engines(func):
    graph_def = func.graph.as_graph_def()
    nodes = list(graph_def.node)
    for f in graph_def.library.function:
        nodes.extend(f.node_def)
    return sum(1 for n in nodes if n.op == "TRTEngineOp")


def timed(func, x, runs):
    out = func(x)  # first call: engines are built here when they were not built before
    for v in out.values():
        v.numpy()
    start = time.perf_counter()
    for _ in range(runs):
        out = func(x)
    for v in out.values():
        v.numpy()
    return out, (time.perf_counter() - start) / runs


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf
    import numpy as np

    if not tf.config.list_physical_devices("GPU"):
        skip(f"no GPU is visible to TensorFlow {tf.__version__} (TF-TRT needs an NVIDIA GPU and TensorRT)")
    reason = why_not_tensorrt(tf)
    if reason:
        skip(reason)
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except (RuntimeError, ValueError):
            pass

    work = args.output_dir or tempfile.mkdtemp(prefix="tftrt-")
    native_dir, trt_dir = os.path.join(work, "native"), os.path.join(work, f"trt_{args.precision.lower()}")
    try:
        model = build_model(tf, args.image_size)
        level = tf.get_logger().level
        tf.get_logger().setLevel("ERROR")  # TF 2.5 warns at length about Keras metadata here
        try:
            tf.saved_model.save(model, native_dir)
        finally:
            tf.get_logger().setLevel(level)
        print(f"saved the native model to {native_dir}", flush=True)

        x = tf.random.uniform((args.batch_size, args.image_size, args.image_size, 3), seed=1)
        conv = converter(tf, native_dir, args.precision)
        conv.convert()

        def input_fn():
            yield (x,)

        conv.build(input_fn=input_fn)  # build the engines now for this input shape
        conv.save(trt_dir)
        print(f"converted with TF-TRT ({args.precision}) to {trt_dir}", flush=True)

        native = tf.saved_model.load(native_dir).signatures["serving_default"]
        converted = tf.saved_model.load(trt_dir).signatures["serving_default"]
        engines = count_engines(converted)
        print(f"TRTEngineOp nodes in the converted graph: {engines}", flush=True)

        ref, native_s = timed(lambda t: native(images=t), x, args.num_runs)
        got, trt_s = timed(lambda t: converted(images=t), x, args.num_runs)
        key = sorted(ref)[0]
        a, b = ref[key].numpy(), got[key].numpy()
        diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
        tolerance = 1e-3 if args.precision == "FP32" else 2e-2
        same_class = float(np.mean(np.argmax(a, -1) == np.argmax(b, -1)))
        print(f"native: {native_s * 1e3:.3f} ms/batch, TF-TRT: {trt_s * 1e3:.3f} ms/batch "
              f"({args.batch_size / trt_s:.1f} images/sec)")
        print(f"max abs difference of '{key}': {diff:.3g} (tolerance {tolerance:g}); "
              f"same top-1 class on {same_class * 100:.0f}% of the batch")
        if engines == 0:
            print("error: TF-TRT converted no part of the graph (no TRTEngineOp)", file=sys.stderr)
            return 1
        if not diff <= tolerance:
            print("error: the TF-TRT outputs differ from the native model's", file=sys.stderr)
            return 1
        print("TF-TRT outputs match the native model: ok")
        return 0
    finally:
        if args.output_dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
