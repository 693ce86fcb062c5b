"""TensorFlow trainers: tensorflow-sync (MultiWorkerMirroredStrategy) and tensorflow-async
(ParameterServerStrategy). Run with TF_USE_LEGACY_KERAS=1: tf.keras is then tf-keras 2.x."""
