package dev.rollcall.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The rows benchmarks append for {@code bench/curve}: the header once, then one line a run. */
@Tag("unit")
class ResultsFileTest {

  @TempDir Path dir;

  @Test
  void aNewFileGetsTheHeaderThenEveryRowBelowIt() throws IOException {
    ResultsFile file = new ResultsFile(dir.resolve("sub").resolve("load.csv"));
    file.append(row(1000, 2.5, false));
    file.append(row(5000, 0.125, true));
    assertEquals(
        List.of("instances,cpu_cores,driver_lagging", "1000,2.5,false", "5000,0.125,true"),
        Files.readAllLines(file.path()));
  }

  @Test
  void anEmptyFileOrOneOfCommentsOnlyGetsTheHeaderAfterThem() throws IOException {
    Path empty = Files.createFile(dir.resolve("empty.csv"));
    new ResultsFile(empty).append(row(1, 1.0, false));
    assertEquals(List.of("instances,cpu_cores,driver_lagging", "1,1,false"), lines(empty));

    Path commented = dir.resolve("commented.csv");
    Files.writeString(commented, "# bench/curve instances\n# measured on abc1234");
    new ResultsFile(commented).append(row(2, 0.0, false));
    assertEquals(
        List.of(
            "# bench/curve instances",
            "# measured on abc1234",
            "instances,cpu_cores,driver_lagging",
            "2,0,false"),
        lines(commented));
  }

  @Test
  void aFileWithTheSameHeaderGetsNoSecondOne() throws IOException {
    Path file = dir.resolve("runs.csv");
    Files.writeString(file, "# a comment\ninstances,cpu_cores,driver_lagging\n1,1,false\n");
    new ResultsFile(file).append(row(2, 2.0, true));
    assertEquals(
        List.of("# a comment", "instances,cpu_cores,driver_lagging", "1,1,false", "2,2,true"),
        lines(file));
  }

  @Test
  void anotherBenchmarksColumnsAreRefusedAndNothingIsWritten() throws IOException {
    Path file = dir.resolve("rest.csv");
    Files.writeString(file, "namespaces,service_cpu_pct\n100,0.5\n");
    IllegalStateException e =
        assertThrows(
            IllegalStateException.class, () -> new ResultsFile(file).append(row(1, 1.0, false)));
    assertTrue(
        e.getMessage().contains("names the columns namespaces,service_cpu_pct"), e.getMessage());
    assertEquals(List.of("namespaces,service_cpu_pct", "100,0.5"), lines(file));
  }

  @Test
  void decimalsAreRoundedToThreePlacesAndAbsentFiguresAreEmptyCells() {
    ResultsFile.Row r =
        new ResultsFile.Row()
            .put("a", 1.23456)
            .put("b", 2.0)
            .put("c", -0.0004)
            .put("d", null)
            .put("e", 42L)
            .put("f", "floor-keyed");
    assertEquals("a,b,c,d,e,f", r.header());
    assertEquals("1.235,2,0,,42,floor-keyed", r.line());
  }

  @Test
  void aCellThatWouldBreakTheCsvIsRefused() {
    assertThrows(IllegalArgumentException.class, () -> new ResultsFile.Row().put("a", "x,y"));
    assertThrows(IllegalArgumentException.class, () -> new ResultsFile.Row().put("a,b", 1));
    assertThrows(IllegalArgumentException.class, () -> new ResultsFile.Row().put("a", "say \"x\""));
    assertThrows(IllegalArgumentException.class, () -> new ResultsFile.Row().put("a", Double.NaN));
    assertThrows(
        IllegalArgumentException.class, () -> new ResultsFile.Row().put("a", 1).put("a", 2));
  }

  @Test
  void thePropertyNamesTheFileAndABlankOneNone() {
    String before = System.getProperty(ResultsFile.PROPERTY);
    try {
      System.setProperty(ResultsFile.PROPERTY, " ");
      assertTrue(ResultsFile.named().isEmpty());
      System.setProperty(ResultsFile.PROPERTY, "bench/results/x-runs.csv");
      assertEquals(Path.of("bench/results/x-runs.csv"), ResultsFile.named().orElseThrow().path());
    } finally {
      if (before == null) {
        System.clearProperty(ResultsFile.PROPERTY);
      } else {
        System.setProperty(ResultsFile.PROPERTY, before);
      }
    }
  }

  private static ResultsFile.Row row(int instances, double cpu, boolean lagging) {
    return new ResultsFile.Row()
        .put("instances", instances)
        .put("cpu_cores", cpu)
        .put("driver_lagging", lagging);
  }

  private static List<String> lines(Path file) throws IOException {
    return Files.readAllLines(file);
  }
}
