package dev.rollcall.bench;

import java.util.List;
import java.util.function.ToLongFunction;

/** A load benchmark run's heartbeat and claim latencies (ms; −1: no sample) in its window. */
record LoadFigures(long heartbeatP50, long heartbeatP99, long claimP50, long claimP99) {

  /** The four figures, named as the tables print them. */
  static final List<Figure> FIGURES =
      List.of(
          new Figure("heartbeat p50", LoadFigures::heartbeatP50),
          new Figure("heartbeat p99", LoadFigures::heartbeatP99),
          new Figure("claim p50", LoadFigures::claimP50),
          new Figure("claim p99", LoadFigures::claimP99));

  /** One of the figures and how to read it. */
  record Figure(String name, ToLongFunction<LoadFigures> of) {}
}
