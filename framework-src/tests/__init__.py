"""tfext's unit tests: each op against TensorFlow's own equivalent (eager, in graphs, its
gradients, a small Keras model), XLA when the build has it, GPU when one is visible.

    cd / && python3 -m unittest discover -s /opt/tensorflow/tensorflow-source/tests \
        -t /opt/tensorflow/tensorflow-source
"""
