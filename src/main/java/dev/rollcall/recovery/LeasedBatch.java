package dev.rollcall.recovery;

import java.time.OffsetDateTime;
import java.util.List;

/** A batch leased to one claimer under one fence. */
public record LeasedBatch(
    long id,
    long epochId,
    EpochKind epochKind,
    int fence,
    OffsetDateTime leaseExpiresAt,
    List<HandedOutRun> runs) {}
