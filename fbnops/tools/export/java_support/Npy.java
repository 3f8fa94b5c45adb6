// Npy.java - reads and writes NumPy .npy files (format version 1.0/2.0, little-endian, C order)
// as tf-java tensors. Emitted by fbnops' tf-java export; self-contained (JDK + tf-java only).
//
// Element types: <f4 (TFloat32), <f2 (TFloat16), <f8 (TFloat64), <i4 (TInt32), <i8 (TInt64),
// |b1 (TBool). bfloat16 has no .npy type: a TBfloat16 is read from and written to a <f4 file
// (the widening is exact; values read are expected to be bfloat16-representable already).

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.tensorflow.Tensor;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.ndarray.buffer.DataBuffers;
import org.tensorflow.proto.DataType;
import org.tensorflow.types.TBfloat16;
import org.tensorflow.types.TBool;
import org.tensorflow.types.TFloat16;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TFloat64;
import org.tensorflow.types.TInt32;
import org.tensorflow.types.TInt64;
import org.tensorflow.types.family.TType;

public final class Npy {
  private static final byte[] MAGIC = {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y'};
  private static final Pattern DESCR = Pattern.compile("'descr'\\s*:\\s*'([<>|=]?)([a-z])(\\d+)'");
  private static final Pattern ORDER = Pattern.compile("'fortran_order'\\s*:\\s*(True|False)");
  private static final Pattern SHAPE = Pattern.compile("'shape'\\s*:\\s*\\(([^)]*)\\)");

  private Npy() {}

  /** The array in {@code path} as a new tensor of class {@code type} (the caller closes it). */
  public static <T extends TType> T read(String path, Class<T> type) throws IOException {
    ByteBuffer bytes = ByteBuffer.wrap(Files.readAllBytes(Path.of(path))).order(ByteOrder.LITTLE_ENDIAN);
    for (byte b : MAGIC) {
      if (bytes.get() != b) {
        throw new IOException(path + ": not a .npy file");
      }
    }
    int major = bytes.get();
    bytes.get();  // minor version
    int headerLength = major == 1 ? Short.toUnsignedInt(bytes.getShort()) : bytes.getInt();
    byte[] headerBytes = new byte[headerLength];
    bytes.get(headerBytes);
    String header = new String(headerBytes, StandardCharsets.ISO_8859_1);
    Matcher descr = DESCR.matcher(header);
    Matcher order = ORDER.matcher(header);
    Matcher shapeText = SHAPE.matcher(header);
    if (!descr.find() || !order.find() || !shapeText.find()) {
      throw new IOException(path + ": unreadable .npy header " + header.trim());
    }
    if (descr.group(1).equals(">") || order.group(1).equals("True")) {
      throw new IOException(path + ": only little-endian C-order arrays are read, got " + header.trim());
    }
    String kind = descr.group(2) + descr.group(3);
    List<Long> dims = new ArrayList<>();
    for (String d : shapeText.group(1).split(",")) {
      if (!d.isBlank()) {
        dims.add(Long.parseLong(d.trim()));
      }
    }
    Shape shape = Shape.of(dims.stream().mapToLong(Long::longValue).toArray());
    int n = (int) shape.size();
    Object tensor;
    if (type == TFloat32.class || type == TBfloat16.class || type == TFloat16.class) {
      float[] values = new float[n];
      for (int i = 0; i < n; i++) {
        switch (kind) {
          case "f4": values[i] = bytes.getFloat(); break;
          case "f2": values[i] = halfToFloat(bytes.getShort()); break;
          default: throw new IOException(path + ": cannot read " + kind + " into " + type.getSimpleName());
        }
      }
      if (type == TFloat32.class) {
        tensor = TFloat32.tensorOf(shape, DataBuffers.of(values));
      } else if (type == TFloat16.class) {
        tensor = TFloat16.tensorOf(shape, DataBuffers.of(values));
      } else {
        tensor = TBfloat16.tensorOf(shape, DataBuffers.of(values));
      }
    } else if (type == TFloat64.class && kind.equals("f8")) {
      double[] values = new double[n];
      bytes.asDoubleBuffer().get(values);
      tensor = TFloat64.tensorOf(shape, DataBuffers.of(values));
    } else if (type == TInt32.class && kind.equals("i4")) {
      int[] values = new int[n];
      bytes.asIntBuffer().get(values);
      tensor = TInt32.tensorOf(shape, DataBuffers.of(values));
    } else if (type == TInt64.class && kind.equals("i8")) {
      long[] values = new long[n];
      bytes.asLongBuffer().get(values);
      tensor = TInt64.tensorOf(shape, DataBuffers.of(values));
    } else if (type == TBool.class && kind.equals("b1")) {
      boolean[] values = new boolean[n];
      for (int i = 0; i < n; i++) {
        values[i] = bytes.get() != 0;
      }
      tensor = TBool.tensorOf(shape, DataBuffers.of(values));
    } else {
      throw new IOException(path + ": cannot read " + kind + " into " + type.getSimpleName());
    }
    return type.cast(tensor);
  }

  /** Writes {@code tensor} to {@code path} (a TBfloat16 widened to <f4), via a temporary file. */
  public static void write(String path, Tensor tensor) throws IOException {
    DataType dtype = tensor.dataType();
    long[] dims = tensor.shape().asArray();
    int n = (int) tensor.shape().size();
    String descr;
    ByteBuffer data;
    if (dtype == DataType.DT_FLOAT || dtype == DataType.DT_BFLOAT16 || dtype == DataType.DT_HALF) {
      float[] values = new float[n];
      if (dtype == DataType.DT_FLOAT) {
        ((TFloat32) tensor).copyTo(DataBuffers.of(values, false, false));
      } else if (dtype == DataType.DT_HALF) {
        ((TFloat16) tensor).copyTo(DataBuffers.of(values, false, false));
      } else {
        ((TBfloat16) tensor).copyTo(DataBuffers.of(values, false, false));
      }
      boolean half = dtype == DataType.DT_HALF;
      descr = half ? "<f2" : "<f4";
      data = ByteBuffer.allocate(n * (half ? 2 : 4)).order(ByteOrder.LITTLE_ENDIAN);
      for (float v : values) {
        if (half) {
          data.putShort(floatToHalf(v));
        } else {
          data.putFloat(v);
        }
      }
    } else if (dtype == DataType.DT_DOUBLE) {
      double[] values = new double[n];
      ((TFloat64) tensor).copyTo(DataBuffers.of(values, false, false));
      descr = "<f8";
      data = ByteBuffer.allocate(n * 8).order(ByteOrder.LITTLE_ENDIAN);
      data.asDoubleBuffer().put(values);
    } else if (dtype == DataType.DT_INT32) {
      int[] values = new int[n];
      ((TInt32) tensor).copyTo(DataBuffers.of(values, false, false));
      descr = "<i4";
      data = ByteBuffer.allocate(n * 4).order(ByteOrder.LITTLE_ENDIAN);
      data.asIntBuffer().put(values);
    } else if (dtype == DataType.DT_INT64) {
      long[] values = new long[n];
      ((TInt64) tensor).copyTo(DataBuffers.of(values, false, false));
      descr = "<i8";
      data = ByteBuffer.allocate(n * 8).order(ByteOrder.LITTLE_ENDIAN);
      data.asLongBuffer().put(values);
    } else if (dtype == DataType.DT_BOOL) {
      boolean[] values = new boolean[n];
      ((TBool) tensor).copyTo(DataBuffers.of(values, false, false));
      descr = "|b1";
      data = ByteBuffer.allocate(n);
      for (boolean v : values) {
        data.put((byte) (v ? 1 : 0));
      }
    } else {
      throw new IOException(path + ": no .npy type for " + dtype);
    }
    StringBuilder shape = new StringBuilder("(");
    for (int i = 0; i < dims.length; i++) {
      shape.append(i == 0 ? "" : ", ").append(dims[i]);
    }
    shape.append(dims.length == 1 ? ",)" : ")");
    String text = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    int padded = ((10 + text.length() + 1 + 63) / 64) * 64;  // header + '\n', 64-byte aligned
    StringBuilder header = new StringBuilder(text);
    while (10 + header.length() + 1 < padded) {
      header.append(' ');
    }
    header.append('\n');
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write(MAGIC);
    out.write(new byte[] {1, 0, (byte) (header.length() & 0xff), (byte) (header.length() >> 8)});
    out.write(header.toString().getBytes(StandardCharsets.ISO_8859_1));
    out.write(data.array());
    Path target = Path.of(path);
    Files.createDirectories(target.toAbsolutePath().getParent());
    Path temp = target.resolveSibling(target.getFileName() + ".tmp");
    Files.write(temp, out.toByteArray());
    Files.move(temp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
  }

  /** IEEE 754 binary16 bits to float (exact). */
  static float halfToFloat(short bits) {
    int h = bits & 0xffff;
    int sign = (h & 0x8000) << 16;
    int exponent = (h >>> 10) & 0x1f;
    int mantissa = h & 0x3ff;
    if (exponent == 0x1f) {
      return Float.intBitsToFloat(sign | 0x7f800000 | (mantissa << 13));
    }
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
      float magnitude = mantissa * 0x1p-24f;
      return sign != 0 ? -magnitude : magnitude;
    }
    return Float.intBitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }

  /** float to binary16 bits, rounding to nearest even (exact for values that are halves). */
  static short floatToHalf(float value) {
    int f = Float.floatToRawIntBits(value);
    int sign = (f >>> 16) & 0x8000;
    int exponent = ((f >>> 23) & 0xff) - 127 + 15;
    int mantissa = f & 0x7fffff;
    if (((f >>> 23) & 0xff) == 0xff) {  // inf or NaN
      return (short) (sign | 0x7c00 | (mantissa != 0 ? 0x200 : 0));
    }
    if (exponent >= 0x1f) {
      return (short) (sign | 0x7c00);
    }
    if (exponent <= 0) {  // subnormal half (or zero)
      if (exponent < -10) {
        return (short) sign;
      }
      mantissa |= 0x800000;
      int shift = 14 - exponent;
      int half = mantissa >>> shift;
      int rest = mantissa & ((1 << shift) - 1);
      int halfway = 1 << (shift - 1);
      if (rest > halfway || (rest == halfway && (half & 1) != 0)) {
        half++;
      }
      return (short) (sign | half);
    }
    int half = (exponent << 10) | (mantissa >>> 13);
    int rest = mantissa & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (half & 1) != 0)) {
      half++;  // may carry into the exponent, which is the correct rounding
    }
    return (short) (sign | half);
  }
}
