package dev.rollcall.api;

import dev.rollcall.admin.AdminService;
import dev.rollcall.admin.AdminViews.BatchView;
import dev.rollcall.admin.AdminViews.EpochView;
import dev.rollcall.admin.AdminViews.Evicted;
import dev.rollcall.admin.AdminViews.InstanceView;
import dev.rollcall.admin.AdminViews.NamespaceView;
import dev.rollcall.admin.AdminViews.Page;
import dev.rollcall.admin.AdminViews.RecoverySwitch;
import dev.rollcall.admin.AdminViews.RunLedger;
import dev.rollcall.admin.AdminViews.StartEpoch;
import dev.rollcall.admin.AdminViews.TimelineView;
import dev.rollcall.admin.Timeline;
import dev.rollcall.error.Problems.InvalidRequest;
import dev.rollcall.recovery.OperatorActions;
import io.smallrye.mutiny.Uni;
import jakarta.ws.rs.Consumes;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.PUT;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.MediaType;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.eclipse.microprofile.openapi.annotations.security.SecurityRequirement;
import org.jboss.resteasy.reactive.ResponseStatus;
import org.jboss.resteasy.reactive.RestPath;
import org.jboss.resteasy.reactive.RestQuery;

/** The operator's view and levers. Every call needs the admin token. */
@SecurityRequirement(name = Credentials.ADMIN_TOKEN)
@Path("/admin")
@Consumes(MediaType.APPLICATION_JSON)
@Produces(MediaType.APPLICATION_JSON)
public class AdminResource {

  private static final Set<String> INSTANCE_STATES = Set.of("live", "dead", "left");
  private static final Set<String> EPOCH_KINDS = Set.of("boot", "takeover", "sweep", "manual");
  private static final Set<String> EPOCH_STATES = Set.of("open", "closed");

  private final AdminService admin;
  private final OperatorActions actions;
  private final Timeline timeline;

  AdminResource(AdminService admin, OperatorActions actions, Timeline timeline) {
    this.admin = admin;
    this.actions = actions;
    this.timeline = timeline;
  }

  /** Namespaces with their instance counts, open epochs and last boot epoch. */
  @GET
  @Path("/namespaces")
  public Uni<Page<NamespaceView>> namespaces() {
    return admin.namespaces();
  }

  /** Instances, newest first. */
  @GET
  @Path("/instances")
  public Uni<Page<InstanceView>> instances(
      @RestQuery String namespace,
      @RestQuery String state,
      @RestQuery Integer limit,
      @RestQuery String cursor) {
    return admin.instances(
        Requests.optionalText(namespace, "namespace"),
        oneOf(state, INSTANCE_STATES, "state"),
        limit,
        Requests.optionalText(cursor, "cursor"));
  }

  /** The last hour of recovery, minute by minute: the console's chart. */
  @GET
  @Path("/timeline")
  public Uni<TimelineView> timeline(@RestQuery String namespace) {
    return timeline.lastHour(Requests.optionalText(namespace, "namespace"));
  }

  /** Epochs with their progress, newest first. */
  @GET
  @Path("/epochs")
  public Uni<Page<EpochView>> epochs(
      @RestQuery String namespace,
      @RestQuery String kind,
      @RestQuery String state,
      @RestQuery Integer limit,
      @RestQuery String cursor) {
    return admin.epochs(
        Requests.optionalText(namespace, "namespace"),
        oneOf(kind, EPOCH_KINDS, "kind"),
        oneOf(state, EPOCH_STATES, "state"),
        limit,
        Requests.optionalText(cursor, "cursor"));
  }

  /** One epoch with its progress. */
  @GET
  @Path("/epochs/{id}")
  public Uni<EpochView> epoch(@RestPath long id) {
    return admin.epoch(id);
  }

  /** The batches of an epoch. */
  @GET
  @Path("/epochs/{id}/batches")
  public Uni<Page<BatchView>> batches(
      @RestPath long id, @RestQuery Integer limit, @RestQuery String cursor) {
    return admin.batches(id, limit, cursor);
  }

  /** A run's ledger: every verdict, hand-out, fence and outcome, and its current owner. */
  @GET
  @Path("/runs/{runId}")
  public Uni<RunLedger> run(@RestPath String runId, @RestQuery String namespace) {
    return admin.run(Requests.text(namespace, "namespace"), Requests.text(runId, "runId"));
  }

  /** Starts a manual recovery pass. */
  @POST
  @Path("/epochs")
  @ResponseStatus(201)
  public Uni<EpochView> start(StartEpoch request) {
    StartEpoch body = Requests.body(request, "namespace and kind");
    if (!"manual".equals(body.kind())) {
      throw new InvalidRequest("'kind' must be 'manual': other passes start on their own");
    }
    return actions.startManual(Requests.text(body.namespace(), "namespace")).chain(admin::epoch);
  }

  /** Closes an open epoch now: nothing more is handed out in it. */
  @POST
  @Path("/epochs/{id}/close")
  public Uni<EpochView> close(@RestPath long id) {
    return actions.close(id).chain(admin::epoch);
  }

  /** Declares an instance dead now, opening its takeover. */
  @POST
  @Path("/instances/{id}/evict")
  public Uni<Evicted> evict(@RestPath UUID id) {
    return actions.evict(id).map(epoch -> new Evicted(id, "dead", epoch.orElse(null)));
  }

  /** The operator's switch for a namespace's boot recovery. */
  @PUT
  @Path("/namespaces/{ns}/recovery")
  public Uni<Map<String, Object>> recovery(@RestPath String ns, RecoverySwitch request) {
    RecoverySwitch body = Requests.body(request, "bootRecovery");
    if (body.bootRecovery() == null) {
      throw new InvalidRequest("'bootRecovery' is required: true or false");
    }
    return actions
        .setBootRecovery(ns, body.bootRecovery())
        .map(on -> Map.of("namespace", ns, "bootRecovery", on));
  }

  private static String oneOf(String value, Set<String> allowed, String field) {
    if (value != null && !allowed.contains(value)) {
      throw new InvalidRequest("'" + field + "' must be one of " + allowed);
    }
    return value;
  }
}
