package dev.rollcall.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A CSV file that benchmarks append their figures to, one row per measured run, when {@code
 * -Dbench.results=FILE} names it (relative to the project directory): {@code bench/curve} reads
 * those rows to draw its curves. The first line that is neither empty nor a {@code #} comment names
 * the columns; it is written before the first row when the file has none yet (new, empty, or only
 * comments, as {@code bench/curve} starts it), and a row whose columns differ from it is refused,
 * so that two benchmarks' rows never mix in one file. Values hold no comma, quote or line break:
 * the files are read by splitting lines at commas ({@code bench/plot.mjs}).
 */
final class ResultsFile {

  /** The system property that names the file. */
  static final String PROPERTY = "bench.results";

  private final Path path;

  ResultsFile(Path path) {
    this.path = path;
  }

  /** The file {@code -Dbench.results} names, if any. */
  static Optional<ResultsFile> named() {
    String name = System.getProperty(PROPERTY, "").trim();
    return name.isEmpty() ? Optional.empty() : Optional.of(new ResultsFile(Path.of(name)));
  }

  /** Appends {@code row} to the file {@code -Dbench.results} names; nothing without it. */
  static void appendIfNamed(Row row) {
    named().ifPresent(file -> file.append(row));
  }

  Path path() {
    return path;
  }

  /** Appends one row, after the header line if the file has none yet. */
  synchronized void append(Row row) {
    try {
      List<String> lines =
          Files.exists(path) ? Files.readAllLines(path, StandardCharsets.UTF_8) : List.of();
      Optional<String> header =
          lines.stream().filter(l -> !l.isBlank() && !l.startsWith("#")).findFirst();
      StringBuilder out = new StringBuilder();
      if (Files.exists(path) && Files.size(path) > 0 && !endsWithNewline()) {
        out.append('\n');
      }
      if (header.isEmpty()) {
        out.append(row.header()).append('\n');
      } else if (!header.get().equals(row.header())) {
        throw new IllegalStateException(
            path
                + " names the columns "
                + header.get()
                + ", not "
                + row.header()
                + ": another benchmark's file, or one written before its columns changed");
      }
      out.append(row.line()).append('\n');
      if (path.getParent() != null) {
        Files.createDirectories(path.getParent());
      }
      Files.writeString(
          path, out, StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot append to " + path, e);
    }
  }

  private boolean endsWithNewline() throws IOException {
    byte[] bytes = Files.readAllBytes(path);
    return bytes[bytes.length - 1] == '\n';
  }

  /**
   * One row: columns in the order they are put, each with its value. A decimal is written with at
   * most three decimals and no trailing zeros; {@code null} is an empty cell (a figure this row has
   * not, as a floor's service replicas).
   */
  static final class Row {
    private final Map<String, String> cells = new LinkedHashMap<>();

    Row put(String column, Object value) {
      if (plain(column).isEmpty()) {
        throw new IllegalArgumentException("a column needs a name");
      }
      if (cells.containsKey(column)) {
        throw new IllegalArgumentException("column " + column + " twice");
      }
      cells.put(column, value == null ? "" : plain(format(value)));
      return this;
    }

    String header() {
      return String.join(",", cells.keySet());
    }

    String line() {
      return String.join(",", cells.values());
    }

    private static String format(Object value) {
      if (value instanceof Double || value instanceof Float) {
        double d = ((Number) value).doubleValue();
        if (Double.isNaN(d) || Double.isInfinite(d)) {
          throw new IllegalArgumentException("not a figure: " + d);
        }
        BigDecimal rounded = BigDecimal.valueOf(d).setScale(3, RoundingMode.HALF_UP);
        return rounded.signum() == 0 ? "0" : rounded.stripTrailingZeros().toPlainString();
      }
      return String.valueOf(value);
    }

    private static String plain(String text) {
      for (char c : new char[] {',', '"', '\n', '\r'}) {
        if (text.indexOf(c) >= 0) {
          throw new IllegalArgumentException("a CSV cell holds no , \" or line break: " + text);
        }
      }
      return text;
    }
  }
}
