"""The brokers of the conventional cluster (as the portal's broker sees them) and of the HA
cluster (as the shared store records them), and the cluster's reload."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter
from rest_framework.response import Response

from broker.admintools.actions.cluster import list_brokers, reload_cluster
from broker.admintools.actions.ha import ha_broker_dict, ha_brokers_queryset

from .. import serializers as s
from ..base import DB_ERRORS, AdminView, QuerysetListView, RowListView, doc


class ClusterBrokerListView(RowListView):
    search_fields = ("address", "instance")

    @doc(
        "List the brokers of the cluster",
        s.ClusterBrokerSerializer(many=True),
        params=[s.ClusterBrokerQuerySerializer],
        description="Every broker of the conventional cluster (imq.cluster.brokerlist) the "
        "portal's broker belongs to, with its state as that broker sees it; a broker that "
        "is not clustered lists itself.",
    )
    def get(self, request):
        q = self.query(s.ClusterBrokerQuerySerializer)
        rows = list_brokers(self.admin)
        return self.page(rows, s.ClusterBrokerSerializer, q)


class ClusterReloadView(AdminView):
    @doc(
        "Reload the cluster configuration",
        s.ClusterReloadSerializer,
        description="imqcmd reload cls: the portal's broker and every broker linked to it "
        "read the cluster's broker list again (imq.cluster.brokerlist in their files, or "
        "the file of imq.cluster.url), link to the brokers added and leave those removed. "
        "Refused (409) for a broker that is not in a conventional cluster; 502 with the "
        "broker's reason when the list cannot be read (nothing changes).",
    )
    def post(self, request):
        return Response(reload_cluster(self.admin, self.actor))


class HABrokerListView(QuerysetListView):
    filter_backends: list = []
    row_serializer = s.HABrokerSerializer
    render = staticmethod(ha_broker_dict)

    def get_queryset(self):
        return ha_brokers_queryset(self.request.query_params.get("cluster_id"))

    @doc(
        "List the brokers of the HA cluster",
        s.HABrokerSerializer(many=True),
        errors=DB_ERRORS,
        params=[OpenApiParameter("cluster_id", str, description="Only this cluster's brokers.")],
        description="Every broker of an HA cluster on the shared database store, with its "
        "state, last heartbeat and the broker that took it over (from the store, so a "
        "broker that is down is listed too). ?cluster_id= limits it to one cluster.",
    )
    def get(self, request):
        return self.list_response()
