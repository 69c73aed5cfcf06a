"""The stack's ECR repository and the trainer image pushed to it (infra.image)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build

from infra.image import build_trainer_image, image_reference


def trainer_image(prefix: str, key_arn: pulumi.Input[str], parent: pulumi.Resource,
                  opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """Build trainer/Dockerfile into `<prefix>/trainer`; returns the pushed image by digest.

    The repository is force-deleted on destroy: its images are rebuilt from this repository.
    """
    repository = aws.ecr.Repository(
        f"{prefix}-trainer", name=f"{prefix}/trainer", force_delete=True,
        image_tag_mutability="MUTABLE",  # the content tag is re-pushed unchanged on rebuilds
        image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(
            scan_on_push=True),
        encryption_configurations=[aws.ecr.RepositoryEncryptionConfigurationArgs(
            encryption_type="KMS", kms_key=key_arn)],
        opts=opts)
    token = aws.ecr.get_authorization_token_output(
        registry_id=repository.registry_id,
        opts=pulumi.InvokeOutputOptions(parent=parent, provider=opts.provider))
    registry = docker_build.RegistryArgs(
        address=repository.repository_url.apply(lambda url: url.split("/")[0]),
        username=token.user_name,
        password=pulumi.Output.secret(token.password),
    )
    image = build_trainer_image(f"{prefix}-trainer", repository.repository_url, registry,
                                parent=parent)
    return image_reference(image)
