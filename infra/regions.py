"""Each cloud's region names, so a region of no cloud (or of another one) is refused by name
before anything is paid for, instead of failing minutes into `pulumi up`.

Data only; the rule is infra/settings/rules.py `region_is_one_of_the_cloud_s`. Checked on
2026-11-26 against the providers' public lists:
- AWS: https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-regions.html, the
  commercial partition only: this program writes `arn:aws:` ARNs (infra/aws/identity.py), so
  GovCloud (us-gov-*) and China (cn-*) would need another partition.
- Azure: https://learn.microsoft.com/azure/reliability/regions-list (the `Name` column, as
  `az account list-locations --query [].name` prints it), plus the access-restricted regions
  a subscription can be granted (jioindia*, swedensouth, taiwan*).
- GCP: https://cloud.google.com/compute/docs/regions-zones (`gcloud compute regions list`).
A region opened after that day is refused until it is added here; the message says so.
"""

from __future__ import annotations

from infra.catalog.cloud import Cloud

CHECKED_ON = "2026-11-26"

REGIONS: dict[Cloud, tuple[str, ...]] = {
    Cloud.AWS: (
        "us-east-1", "us-east-2", "us-west-1", "us-west-2",
        "af-south-1",
        "ap-east-1", "ap-east-2", "ap-south-1", "ap-south-2",
        "ap-northeast-1", "ap-northeast-2", "ap-northeast-3",
        "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4",
        "ap-southeast-5", "ap-southeast-6", "ap-southeast-7",
        "ca-central-1", "ca-west-1",
        "eu-central-1", "eu-central-2", "eu-north-1", "eu-south-1", "eu-south-2",
        "eu-west-1", "eu-west-2", "eu-west-3",
        "il-central-1", "me-central-1", "me-south-1",
        "mx-central-1", "sa-east-1",
    ),
    Cloud.AZURE: (
        "eastus", "eastus2", "centralus", "northcentralus", "southcentralus", "westcentralus",
        "westus", "westus2", "westus3",
        "canadacentral", "canadaeast", "brazilsouth", "brazilsoutheast", "mexicocentral",
        "chilecentral",
        "northeurope", "westeurope", "uksouth", "ukwest", "francecentral", "francesouth",
        "germanywestcentral", "germanynorth", "switzerlandnorth", "switzerlandwest",
        "norwayeast", "norwaywest", "swedencentral", "polandcentral", "italynorth",
        "spaincentral", "austriaeast", "belgiumcentral", "denmarkeast",
        "israelcentral", "qatarcentral", "uaenorth", "uaecentral",
        "southafricanorth", "southafricawest",
        "centralindia", "southindia", "westindia",
        "eastasia", "southeastasia", "japaneast", "japanwest", "koreacentral", "koreasouth",
        "indonesiacentral", "malaysiawest",
        "australiaeast", "australiasoutheast", "australiacentral", "australiacentral2",
        "newzealandnorth",
        # access-restricted: usable once Microsoft grants the subscription access
        "jioindiawest", "jioindiacentral", "swedensouth", "taiwannorth", "taiwannorthwest",
    ),
    Cloud.GCP: (
        "us-central1", "us-east1", "us-east4", "us-east5", "us-south1",
        "us-west1", "us-west2", "us-west3", "us-west4",
        "northamerica-northeast1", "northamerica-northeast2", "northamerica-south1",
        "southamerica-east1", "southamerica-west1",
        "europe-central2", "europe-north1", "europe-north2", "europe-southwest1",
        "europe-west1", "europe-west2", "europe-west3", "europe-west4", "europe-west6",
        "europe-west8", "europe-west9", "europe-west10", "europe-west12",
        "me-central1", "me-central2", "me-west1", "africa-south1",
        "asia-east1", "asia-east2", "asia-northeast1", "asia-northeast2", "asia-northeast3",
        "asia-south1", "asia-south2", "asia-southeast1", "asia-southeast2", "asia-southeast3",
        "australia-southeast1", "australia-southeast2",
    ),
}


def cloud_of_region(region: str) -> Cloud | None:
    """The cloud whose list names `region` (names never collide across the three)."""
    return next((cloud for cloud, names in REGIONS.items() if region in names), None)


# The same metro (or the nearest one) in each cloud, for a region name carried over from
# another cloud's stack (`region: us-east-1` on Azure). Locations from the lists above:
# N. Virginia (AWS us-east-1, Azure eastus, GCP us-east4 Ashburn), Ohio (us-east-2, GCP
# us-east5 Columbus), N. California / Los Angeles, Oregon / Washington, Iowa (Azure centralus,
# GCP us-central1), Montreal / Quebec, Sao Paulo, Ireland (GCP has none: Belgium, europe-west1),
# Netherlands, London, Frankfurt, Paris, Stockholm, Mumbai, Singapore, Hong Kong, Tokyo, Seoul,
# Sydney. Only these are mapped; any other name gets the closest spelling or no command.
COUNTERPARTS: tuple[dict[Cloud, str], ...] = (
    {Cloud.AWS: "us-east-1", Cloud.AZURE: "eastus", Cloud.GCP: "us-east4"},
    {Cloud.AWS: "us-east-2", Cloud.GCP: "us-east5"},
    {Cloud.AWS: "us-west-1", Cloud.AZURE: "westus", Cloud.GCP: "us-west2"},
    {Cloud.AWS: "us-west-2", Cloud.AZURE: "westus2", Cloud.GCP: "us-west1"},
    {Cloud.AZURE: "centralus", Cloud.GCP: "us-central1"},
    {Cloud.AWS: "ca-central-1", Cloud.AZURE: "canadaeast", Cloud.GCP: "northamerica-northeast1"},
    {Cloud.AWS: "sa-east-1", Cloud.AZURE: "brazilsouth", Cloud.GCP: "southamerica-east1"},
    {Cloud.AWS: "eu-west-1", Cloud.AZURE: "northeurope", Cloud.GCP: "europe-west1"},
    {Cloud.AZURE: "westeurope", Cloud.GCP: "europe-west4"},
    {Cloud.AWS: "eu-west-2", Cloud.AZURE: "uksouth", Cloud.GCP: "europe-west2"},
    {Cloud.AWS: "eu-central-1", Cloud.AZURE: "germanywestcentral", Cloud.GCP: "europe-west3"},
    {Cloud.AWS: "eu-west-3", Cloud.AZURE: "francecentral", Cloud.GCP: "europe-west9"},
    {Cloud.AWS: "eu-north-1", Cloud.AZURE: "swedencentral", Cloud.GCP: "europe-north2"},
    {Cloud.AWS: "ap-south-1", Cloud.AZURE: "westindia", Cloud.GCP: "asia-south1"},
    {Cloud.AWS: "ap-southeast-1", Cloud.AZURE: "southeastasia", Cloud.GCP: "asia-southeast1"},
    {Cloud.AWS: "ap-east-1", Cloud.AZURE: "eastasia", Cloud.GCP: "asia-east2"},
    {Cloud.AWS: "ap-northeast-1", Cloud.AZURE: "japaneast", Cloud.GCP: "asia-northeast1"},
    {Cloud.AWS: "ap-northeast-2", Cloud.AZURE: "koreacentral", Cloud.GCP: "asia-northeast3"},
    {Cloud.AWS: "ap-southeast-2", Cloud.AZURE: "australiaeast", Cloud.GCP: "australia-southeast1"},
)


def counterpart(region: str, cloud: Cloud) -> str | None:
    """`cloud`'s region in the same metro as another cloud's `region` (None: not mapped)."""
    return next((group[cloud] for group in COUNTERPARTS
                 if cloud in group and region in group.values() and group[cloud] != region), None)
