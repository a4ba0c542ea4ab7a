"""CreateAcls, DescribeAcls and DeleteAcls (v1, with resource pattern types), at any
broker. The enums are the authorizer's own (broker/authorizer/acl.py), Kafka's codes."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from brook.broker.authorizer.acl import AclBindingFilter, PatternType, PermissionType, ResourceType
from brook.broker.authorizer.operations import AclOperation

from ..wire_client import ApiError, KafkaCluster, api_error

# An ACL, or (None and the ANY values matching anything) a filter of ACLs: the
# authorizer's own type, whose fields both are.
AclBinding = AclBindingFilter


def create_acls(cluster: KafkaCluster, bindings: list[AclBinding]) -> list[ApiError | None]:
    """Create each binding: its error, in the order given (None: created)."""
    from kio.schema.create_acls.v1 import request as create1

    response = cluster.request_any(
        create1.CreateAclsRequest(
            creations=tuple(
                create1.AclCreation(
                    resource_type=i8(b.resource_type),
                    resource_name=b.name or "",
                    resource_pattern_type=i8(b.pattern_type),
                    principal=b.principal or "",
                    host=b.host or "",
                    operation=i8(b.operation),
                    permission_type=i8(b.permission),
                )
                for b in bindings
            )
        )
    )
    return [api_error(result.error_code, result.error_message) for result in response.results]


def describe_acls(cluster: KafkaCluster, selected: AclBinding) -> list[AclBinding]:
    """The ACLs the filter `selected` matches, in the broker's order."""
    from kio.schema.describe_acls.v1.request import DescribeAclsRequest

    response = cluster.request_any(
        DescribeAclsRequest(
            resource_type_filter=i8(selected.resource_type),
            resource_name_filter=selected.name,
            pattern_type_filter=i8(selected.pattern_type),
            principal_filter=selected.principal,
            host_filter=selected.host,
            operation=i8(selected.operation),
            permission_type=i8(selected.permission),
        )
    )
    if response.error_code != ErrorCode.none:
        raise ApiError(response.error_code, response.error_message)
    return [
        AclBinding(
            ResourceType(resource.resource_type),
            resource.resource_name,
            PatternType(resource.pattern_type),
            acl.principal,
            acl.host,
            AclOperation(acl.operation),
            PermissionType(acl.permission_type),
        )
        for resource in response.resources
        for acl in resource.acls
    ]


def delete_acls(cluster: KafkaCluster, filters: list[AclBinding]) -> list[ApiError | None]:
    """Delete what each filter matches: the filter's error, in the order given."""
    from kio.schema.delete_acls.v1 import request as delete1

    response = cluster.request_any(
        delete1.DeleteAclsRequest(
            filters=tuple(
                delete1.DeleteAclsFilter(
                    resource_type_filter=i8(f.resource_type),
                    resource_name_filter=f.name,
                    pattern_type_filter=i8(f.pattern_type),
                    principal_filter=f.principal,
                    host_filter=f.host,
                    operation=i8(f.operation),
                    permission_type=i8(f.permission),
                )
                for f in filters
            )
        )
    )
    return [
        api_error(result.error_code, result.error_message) for result in response.filter_results
    ]
