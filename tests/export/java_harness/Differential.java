// Differential.java - the Java side of tests/export/test_java_differential.py.
//
// Runs every case on real tf-java 1.1.0 in this one JVM and prints one JSON line per case:
//   {"case": NAME, "ok": [items]}            items are strings or float lists
//   {"case": NAME, "error": CLASS, "message": MESSAGE}   the exception's simple class name
// The Python test runs the same builder program through bindings_mirror.java and compares.
// `Differential --then CLASS` then runs CLASS.main in this JVM: the tf-java export of the mirror's
// program (run with the export's directory as the working directory).
// Inputs are exact in float32 (small multiples of 1/4), so both sides start from the same bits.

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import org.tensorflow.EagerSession;
import org.tensorflow.Graph;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.Tensor;
import org.tensorflow.ndarray.FloatNdArray;
import org.tensorflow.ndarray.NdArrays;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.ndarray.buffer.DataBuffers;
import org.tensorflow.op.Ops;
import org.tensorflow.op.core.Constant;
import org.tensorflow.op.core.Placeholder;
import org.tensorflow.op.nn.FusedBatchNorm;
import org.tensorflow.op.nn.FusedBatchNormGrad;
import org.tensorflow.types.TFloat16;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TInt32;

public final class Differential {
  static final Shape X_SHAPE = Shape.of(2, 2, 2, 3);

  /** x[i] = ((7 i) mod 11) / 4 - 1: exact in float32 and reproducible in NumPy. */
  static float[] values(int n, int mul, int mod) {
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      v[i] = ((i * mul) % mod) / 4.0f - 1.0f;
    }
    return v;
  }

  static TFloat32 xTensor() {
    return TFloat32.tensorOf(X_SHAPE, DataBuffers.of(values(24, 7, 11)));
  }

  static TFloat32 dyTensor() {
    return TFloat32.tensorOf(X_SHAPE, DataBuffers.of(values(24, 5, 13)));
  }

  /** The builder program every graph case shares: x, constants, bn (V3 forward), grad (V3). */
  static final class Program {
    final Graph graph = new Graph();
    final Ops tf = Ops.create(graph);
    final Placeholder<TFloat32> x = tf.withName("x").placeholder(TFloat32.class, Placeholder.shape(X_SHAPE));
    final Placeholder<TFloat32> dy = tf.withName("dy").placeholder(TFloat32.class, Placeholder.shape(X_SHAPE));
    final Constant<TFloat32> scale = tf.withName("scale").constant(new float[] {1.0f, 0.5f, 2.0f});
    final Constant<TFloat32> offset = tf.withName("offset").constant(new float[] {0.0f, 1.0f, -1.0f});
    final Constant<TFloat32> empty = tf.withName("empty").constant(new float[] {});
    final FusedBatchNorm<TFloat32, TFloat32> bn;
    final FusedBatchNormGrad<TFloat32, TFloat32> grad;

    Program() {
      bn = tf.withName("bn").nn.fusedBatchNorm(x, scale, offset, empty, empty, FusedBatchNorm.epsilon(0.001f));
      grad = tf.withName("grad").nn.fusedBatchNormGrad(dy, x, scale, bn.reserveSpace1(), bn.reserveSpace2(),
          bn.reserveSpace3(), FusedBatchNormGrad.epsilon(0.001f));
    }
  }

  static String floats(Tensor t) {
    TFloat32 f = (TFloat32) t;
    float[] v = new float[(int) f.shape().size()];
    f.copyTo(DataBuffers.of(v, false, false));
    StringBuilder s = new StringBuilder("[");
    for (int i = 0; i < v.length; i++) {
      s.append(i == 0 ? "" : ",").append(v[i]);
    }
    return s.append("]").toString();
  }

  static String str(String s) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }

  static String items(String... parts) {
    return "[" + String.join(",", parts) + "]";
  }

  /** Runs {@code runner} on a fresh Program with x and dy fed, returning each fetched tensor as floats. */
  interface RunnerCase {
    Session.Runner fetches(Program p, Session.Runner runner);
  }

  static String runProgram(RunnerCase c) {
    Program p = new Program();
    try (Session s = new Session(p.graph); TFloat32 x = xTensor(); TFloat32 dy = dyTensor();
        Result r = c.fetches(p, s.runner().feed(p.x, x).feed(p.dy, dy)).run()) {
      List<String> parts = new ArrayList<>();
      for (int i = 0; i < r.size(); i++) {
        parts.add(floats(r.get(i)));
      }
      return items(parts.toArray(new String[0]));
    } finally {
      p.graph.close();
    }
  }

  static Map<String, Callable<String>> cases() {
    Map<String, Callable<String>> cases = new LinkedHashMap<>();
    cases.put("forward_and_gradient_values", () -> runProgram((p, r) -> r.fetch(p.bn.y()).fetch(p.bn.batchMean())
        .fetch(p.bn.batchVariance()).fetch(p.grad.xBackprop()).fetch(p.grad.scaleBackprop())
        .fetch(p.grad.offsetBackprop())));
    cases.put("fetch_by_op_name_is_output_0", () -> runProgram((p, r) -> r.fetch("bn").fetch("bn", 1).fetch("bn:2")));
    cases.put("result_keys_and_optional", () -> {
      Program p = new Program();
      try (Session s = new Session(p.graph); TFloat32 x = xTensor();
          Result r = s.runner().feed("x", x).fetch("bn").fetch(p.bn.batchMean()).run()) {
        return items(str(new TreeSet<>(r.keySet()).toString()), str(String.valueOf(r.get("bn").isPresent())),
            str(String.valueOf(r.get("bn:0").isPresent())), floats(r.get("bn:1").get()));
      }
    });
    cases.put("shape_mismatch_at_build", () -> {
      Program p = new Program();
      Constant<TFloat32> four = p.tf.withName("four").constant(new float[] {1, 1, 1, 1});
      p.tf.withName("bad").nn.fusedBatchNorm(p.x, four, p.offset, p.empty, p.empty);
      return items();
    });
    cases.put("dtype_mismatch_at_build", () -> {
      Program p = new Program();
      Constant<TFloat16> half;
      try (TFloat16 h = TFloat16.vectorOf(1, 1, 1)) {
        half = p.tf.withName("half").constantOf(h);
      }
      p.tf.withName("bad").nn.fusedBatchNorm(p.x, half, half, half, half);
      return items();
    });
    cases.put("bad_attr_data_format", () -> {
      Program p = new Program();
      p.tf.withName("bad").nn.fusedBatchNorm(p.x, p.scale, p.offset, p.empty, p.empty,
          FusedBatchNorm.dataFormat("NCWH"));
      return items();
    });
    cases.put("frozen_with_empty_mean", () -> {
      Program p = new Program();
      var frozen = p.tf.withName("frozen").nn.fusedBatchNorm(p.x, p.scale, p.offset, p.empty, p.empty,
          FusedBatchNorm.isTraining(false));
      try (Session s = new Session(p.graph); TFloat32 x = xTensor();
          Result r = s.runner().feed(p.x, x).fetch(frozen.y()).run()) {
        return items(floats(r.get(0)));
      }
    });
    cases.put("missing_feed", () -> {
      Program p = new Program();
      try (Session s = new Session(p.graph); Result r = s.runner().fetch(p.bn.y()).run()) {
        return items(floats(r.get(0)));
      }
    });
    cases.put("feed_dtype_mismatch", () -> {
      Program p = new Program();
      try (Session s = new Session(p.graph); TInt32 x = TInt32.tensorOf(X_SHAPE);
          Result r = s.runner().feed(p.x, x).fetch(p.bn.y()).run()) {
        return items(floats(r.get(0)));
      }
    });
    cases.put("feed_dtype_mismatch_second_feed", () -> {
      Program p = new Program();
      try (Session s = new Session(p.graph); TFloat32 x = xTensor(); TInt32 dy = TInt32.tensorOf(X_SHAPE);
          Result r = s.runner().feed(p.x, x).feed(p.dy, dy).fetch(p.grad.xBackprop()).run()) {
        return items(floats(r.get(0)));
      }
    });
    cases.put("feed_shape_mismatch_at_run", () -> {
      Program p = new Program();
      try (Session s = new Session(p.graph); TFloat32 x = TFloat32.tensorOf(Shape.of(2, 2, 2, 4));
          Result r = s.runner().feed(p.x, x).fetch(p.bn.y()).run()) {
        return items(floats(r.get(0)));
      }
    });
    cases.put("fetch_index_out_of_range", () -> runProgram((p, r) -> r.fetch("bn", 9)));
    cases.put("fetch_index_out_of_range_by_name", () -> runProgram((p, r) -> r.fetch("bn:9")));
    cases.put("fetch_unknown_op", () -> runProgram((p, r) -> r.fetch("nope")));
    cases.put("fetch_badly_formatted_name", () -> runProgram((p, r) -> r.fetch("bn:x")));
    cases.put("feed_unknown_op", () -> {
      Program p = new Program();
      try (Session s = new Session(p.graph); TFloat32 x = xTensor()) {
        s.runner().feed("nope", x);
        return items();
      }
    });
    cases.put("fetch_name_collision", () -> runProgram((p, r) -> r.fetch("bn").fetch("bn")));
    cases.put("closed_result_get", () -> {
      Program p = new Program();
      try (Session s = new Session(p.graph); TFloat32 x = xTensor()) {
        Result r = s.runner().feed(p.x, x).fetch(p.bn.y()).run();
        r.close();
        return items(floats(r.get(0)));
      }
    });
    cases.put("closed_session_run", () -> {
      Program p = new Program();
      Session s = new Session(p.graph);
      s.close();
      try (TFloat32 x = xTensor(); Result r = s.runner().feed(p.x, x).fetch(p.bn.y()).run()) {
        return items(floats(r.get(0)));
      }
    });
    cases.put("closed_graph_build", () -> {
      Program p = new Program();
      p.graph.close();
      p.tf.withName("late").constant(new float[] {1});
      return items();
    });
    cases.put("closed_graph_new_session", () -> {
      Program p = new Program();
      p.graph.close();
      try (Session s = new Session(p.graph)) {
        return items();
      }
    });
    cases.put("closed_eager_session_build", () -> {
      EagerSession eager = EagerSession.create();
      Ops tf = Ops.create(eager);
      eager.close();
      tf.constant(new float[] {1});
      return items();
    });
    cases.put("closed_eager_session_read", () -> {
      EagerSession eager = EagerSession.create();
      Ops tf = Ops.create(eager);
      var y = tf.withName("y").constant(new float[] {1, 2});
      eager.close();
      return items(floats(y.asTensor()));
    });
    cases.put("eager_forward_values", () -> {
      try (EagerSession eager = EagerSession.create(); TFloat32 xValue = xTensor()) {
        Ops tf = Ops.create(eager);
        var x = tf.constantOf(xValue);
        var empty = tf.constant(new float[] {});
        var bn = tf.nn.fusedBatchNorm(x, tf.constant(new float[] {1.0f, 0.5f, 2.0f}),
            tf.constant(new float[] {0.0f, 1.0f, -1.0f}), empty, empty, FusedBatchNorm.epsilon(0.001f));
        return items(floats(bn.y().asTensor()), floats(bn.batchMean().asTensor()));
      }
    });
    cases.put("tensor_of_copies_the_array", () -> {
      FloatNdArray array = NdArrays.vectorOf(1.0f, 2.0f, 3.0f);
      try (TFloat32 t = TFloat32.tensorOf(array)) {
        array.setFloat(99.0f, 0);
        return items(floats(t));
      }
    });
    cases.put("frozen_v1_batch_mean_fetch", () -> {
      Program p = new Program();
      Constant<TFloat32> mean = p.tf.withName("mean").constant(new float[] {0.5f, 1.0f, -0.5f});
      Constant<TFloat32> variance = p.tf.withName("variance").constant(new float[] {1.0f, 2.0f, 4.0f});
      var v1 = p.tf.withName("v1").scope().opBuilder("FusedBatchNorm", "FusedBatchNorm")
          .addInput(p.x.asOutput()).addInput(p.scale.asOutput()).addInput(p.offset.asOutput())
          .addInput(mean.asOutput()).addInput(variance.asOutput()).setAttr("epsilon", 0.001f)
          .setAttr("is_training", false).build();
      try (Session s = new Session(p.graph); TFloat32 x = xTensor();
          Result r = s.runner().feed(p.x, x).fetch("v1", 0).fetch("v1", 1).run()) {
        return items(floats(r.get(0)), floats(r.get(1)));
      }
    });
    return cases;
  }

  public static void main(String[] args) {
    for (Map.Entry<String, Callable<String>> c : cases().entrySet()) {
      String line;
      try {
        line = "\"ok\": " + c.getValue().call();
      } catch (Exception e) {
        line = "\"error\": " + str(e.getClass().getSimpleName()) + ", \"message\": " + str(String.valueOf(e.getMessage()));
      }
      System.out.println("{\"case\": " + str(c.getKey()) + ", " + line + "}");
      System.out.flush();
    }
    if (args.length == 2 && args[0].equals("--then")) {
      try {
        Class.forName(args[1]).getMethod("main", String[].class).invoke(null, (Object) new String[0]);
      } catch (ReflectiveOperationException e) {
        throw new IllegalStateException("cannot run " + args[1], e);
      }
    }
  }
}
