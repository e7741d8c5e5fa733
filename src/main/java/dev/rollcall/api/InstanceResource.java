package dev.rollcall.api;

import dev.rollcall.api.dto.Dtos.HeartbeatRequest;
import dev.rollcall.api.dto.Dtos.HeartbeatResponse;
import dev.rollcall.api.dto.Dtos.InFlightEntry;
import dev.rollcall.api.dto.Dtos.LeaveRequest;
import dev.rollcall.api.dto.Dtos.RegisterRequest;
import dev.rollcall.api.dto.Dtos.RegisterResponse;
import dev.rollcall.api.dto.Dtos.SessionLockKeys;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.recovery.Departures;
import dev.rollcall.registry.Caller;
import dev.rollcall.registry.Heartbeats;
import dev.rollcall.registry.InFlight;
import dev.rollcall.registry.Ownership;
import dev.rollcall.registry.Registrations;
import dev.rollcall.registry.Registrations.NewInstance;
import dev.rollcall.registry.SessionLiveness;
import dev.rollcall.registry.SessionLiveness.SessionReport;
import dev.rollcall.tracing.RecoveryTraces;
import io.smallrye.mutiny.Uni;
import jakarta.ws.rs.Consumes;
import jakarta.ws.rs.DELETE;
import jakarta.ws.rs.HeaderParam;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.HttpHeaders;
import jakarta.ws.rs.core.MediaType;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import org.eclipse.microprofile.openapi.annotations.security.SecurityRequirement;
import org.jboss.resteasy.reactive.ResponseStatus;
import org.jboss.resteasy.reactive.RestPath;

/** Instances register, heartbeat and leave. */
@Path("/instances")
@Consumes(MediaType.APPLICATION_JSON)
@Produces(MediaType.APPLICATION_JSON)
public class InstanceResource {

  private final Registrations registrations;
  private final Heartbeats heartbeats;
  private final Departures departures;
  private final RollcallConfig config;
  private final RateLimiter limiter;
  private final RequestCaller caller;
  private final RecoveryTraces traces;

  InstanceResource(
      Registrations registrations,
      Heartbeats heartbeats,
      Departures departures,
      RollcallConfig config,
      RateLimiter limiter,
      RequestCaller caller,
      RecoveryTraces traces) {
    this.traces = traces;
    this.registrations = registrations;
    this.heartbeats = heartbeats;
    this.departures = departures;
    this.config = config;
    this.limiter = limiter;
    this.caller = caller;
  }

  /** Registers an instance with its namespace's registration secret. */
  @POST
  @ResponseStatus(201)
  public Uni<RegisterResponse> register(
      @HeaderParam(HttpHeaders.AUTHORIZATION) String authorization, RegisterRequest request) {
    String secret = Requests.bearer(authorization);
    RegisterRequest body = Requests.body(request, "namespace, deploymentId and name");
    NewInstance instance =
        new NewInstance(
            Requests.text(body.namespace(), "namespace"),
            Requests.text(body.deploymentId(), "deploymentId"),
            Requests.text(body.name(), "name"),
            Requests.texts(body.workerIds(), "workerIds", Requests.MAX_WORKER_IDS),
            inFlight(body.inFlight()));
    return traces
        .traced(
            RecoveryTraces.REGISTER,
            span -> registrations.register(secret, instance),
            (span, r) ->
                RecoveryTraces.registered(
                    span, instance.namespace(), instance.deploymentId(), r.instanceId()))
        .map(
            r ->
                new RegisterResponse(
                    r.instanceId(),
                    r.token(),
                    r.leaseExpiresAt(),
                    config.leaseTtl().toMillis(),
                    config.heartbeatInterval().toMillis(),
                    new SessionLockKeys(SessionLiveness.CLASS_ID, r.sessionLockObjId())));
  }

  /** Renews the instance's lease. */
  @POST
  @Path("/{id}/heartbeat")
  @SecurityRequirement(name = Credentials.INSTANCE_TOKEN)
  public Uni<HeartbeatResponse> heartbeat(@RestPath UUID id, HeartbeatRequest request) {
    Optional<List<InFlight>> inFlight = inFlight(request == null ? null : request.inFlight());
    Optional<SessionReport> session =
        Optional.ofNullable(request).map(HeartbeatRequest::sessionLock).map(Requests::session);
    List<String> workerIds =
        Requests.texts(
            request == null ? null : request.workerIds(), "workerIds", Requests.MAX_WORKER_IDS);
    Caller caller = this.caller.get();
    caller.requireSelf(id);
    limiter.heartbeat(caller.instanceId());
    return heartbeats
        .heartbeat(caller, inFlight, session, workerIds)
        .map(
            h ->
                new HeartbeatResponse(
                    h.leaseExpiresAt(), h.recoveryPending(), h.recheckAfterMs().orElse(null)));
  }

  /**
   * Leaves gracefully, optionally with the last in-flight set: the instance's batches are released
   * and its takeover opens at once. With {@code "exiting": true} (the process exits right after),
   * only its lease is shortened to the departure grace: its takeover follows once it ran out.
   */
  @DELETE
  @Path("/{id}")
  @ResponseStatus(204)
  @SecurityRequirement(name = Credentials.INSTANCE_TOKEN)
  public Uni<Void> leave(@RestPath UUID id, LeaveRequest request) {
    Optional<List<InFlight>> inFlight = inFlight(request == null ? null : request.inFlight());
    Caller caller = this.caller.get();
    caller.requireSelf(id);
    return request != null && Boolean.TRUE.equals(request.exiting())
        ? departures.exiting(caller, inFlight)
        : departures.leave(caller, inFlight);
  }

  private static Optional<List<InFlight>> inFlight(List<InFlightEntry> entries) {
    return entries == null
        ? Optional.empty()
        : Optional.of(Requests.inFlight(entries, "inFlight", Ownership.MAX_IN_FLIGHT));
  }
}
