"""HTTP endpoints of skills (`openai/resources/skills/`): create from a zip or a directory's files, list,
retrieve, set the default version, delete; a skill's versions likewise; a version's bundle as a zip."""

from __future__ import annotations

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..core.models import StrictModel
from ..core.requests import tenant_of
from ..errors import APIError, bad_request
from ..files.routes import download
from ..files.upload import read_small_form
from ..jsontext import JSONResponse
from ..storage.paging import page_of, page_query
from ..storage.skill_store import LastVersion
from ..web.body import parse_body
from .bundle import MAX_FILES, Bundle
from .needs import needs_of
from .service import MAX_UPLOAD_BYTES, SkillService, read_bundle, skill_not_found

FILE_FIELDS = ("files", "files[]")  # one zip, or a directory's files (the SDK's array form)


def skills_of(request: Request) -> SkillService:
    return needs_of(request).skills


async def _uploaded(request: Request) -> tuple[Bundle, dict[str, str]]:
    """The bundle the form's files make, and the form's other fields."""
    idle_s = needs_of(request).files.config.upload_idle_timeout_s
    form = await read_small_form(request, MAX_UPLOAD_BYTES, MAX_FILES, idle_s)
    strays = [name for name, _, _ in form.files if name not in FILE_FIELDS]
    if strays:
        raise bad_request(f"Unknown parameter: '{strays[0][:100]}'.", param=strays[0][:100], code="unknown_parameter")
    return await read_bundle(form.files), form.fields


async def create_skill(request: Request) -> Response:
    bundle, fields = await _uploaded(request)
    _no_fields(fields)
    skill = await skills_of(request).create(tenant_of(request), bundle)
    return JSONResponse(skill.as_dict())


async def list_skills(request: Request) -> Response:
    query = page_query(request)
    found = await skills_of(request).store.list_skills(tenant_of(request), query)
    return JSONResponse(page_of(found, query))


async def retrieve_skill(request: Request) -> Response:
    skill = await skills_of(request).skill(request.path_params["skill_id"], tenant_of(request))
    return JSONResponse(skill.as_dict())


class UpdateSkill(StrictModel):
    default_version: str = Field(pattern=r"^[1-9][0-9]{0,8}$")


async def update_skill(request: Request) -> Response:
    body = await parse_body(request, UpdateSkill, needs_of(request).config.server.body_limits())
    version = body.default_version
    skills, skill_id = skills_of(request), request.path_params["skill_id"]
    updated = await skills.store.set_default(skill_id, tenant_of(request), int(version))
    if updated is None:
        await skills.skill(skill_id, tenant_of(request))  # the skill's 404, if it is the skill that is missing
        raise APIError(404, f"Skill '{skill_id}' has no version {version}.", param="default_version", code="not_found")
    return JSONResponse(updated.as_dict())


async def delete_skill(request: Request) -> Response:
    skills, skill_id = skills_of(request), request.path_params["skill_id"]
    blobs = await skills.store.delete(skill_id, tenant_of(request))
    if blobs is None:
        raise skill_not_found(skill_id)
    await skills.blobs.remove(*blobs)
    return JSONResponse({"id": skill_id, "object": "skill.deleted", "deleted": True})


async def skill_content(request: Request) -> Response:
    skills = skills_of(request)
    version = await skills.version(request.path_params["skill_id"], tenant_of(request), None)
    return await download(needs_of(request).files, version.blob, f"{version.name}.zip")


async def create_version(request: Request) -> Response:
    bundle, fields = await _uploaded(request)
    default = fields.pop("default", "false")
    if default not in ("true", "false"):
        raise bad_request("default is true or false.", param="default")
    _no_fields(fields)
    version = await skills_of(request).add_version(request.path_params["skill_id"], tenant_of(request), bundle, default == "true")
    return JSONResponse(version.as_dict())


async def list_versions(request: Request) -> Response:
    skills, skill_id = skills_of(request), request.path_params["skill_id"]
    await skills.skill(skill_id, tenant_of(request))
    query = page_query(request)
    found = await skills.store.list_versions(skill_id, tenant_of(request), query)
    return JSONResponse(page_of(found, query))


async def retrieve_version(request: Request) -> Response:
    version = await skills_of(request).version(request.path_params["skill_id"], tenant_of(request), _number(request))
    return JSONResponse(version.as_dict())


async def delete_version(request: Request) -> Response:
    skills, skill_id = skills_of(request), request.path_params["skill_id"]
    version = await skills.version(skill_id, tenant_of(request), _number(request))
    try:
        removed = await skills.store.delete_version(skill_id, tenant_of(request), version.version)
    except LastVersion:
        raise bad_request("The default version cannot be deleted: make another version the default first.", param="version") from None
    if removed is not None:
        await skills.blobs.remove(removed.blob)
    return JSONResponse({"id": version.id, "object": "skill.version.deleted", "deleted": True, "version": str(version.version)})


async def version_content(request: Request) -> Response:
    version = await skills_of(request).version(request.path_params["skill_id"], tenant_of(request), _number(request))
    return await download(needs_of(request).files, version.blob, f"{version.name}.zip")


def _number(request: Request) -> str:
    number: str = request.path_params["version"]
    if number == "latest" or (number.isascii() and number.isdigit() and len(number) <= 9):
        return number
    raise bad_request(f"A skill version is a positive integer or 'latest', not '{number[:50]}'.", param="version")


def _no_fields(fields: dict[str, str]) -> None:
    if fields:
        name = next(iter(fields))[:100]
        raise bad_request(f"Unknown parameter: '{name}'.", param=name, code="unknown_parameter")


routes = [
    Route("/v1/skills", create_skill, methods=["POST"]),
    Route("/v1/skills", list_skills, methods=["GET"]),
    Route("/v1/skills/{skill_id}", retrieve_skill, methods=["GET"]),
    Route("/v1/skills/{skill_id}", update_skill, methods=["POST"]),
    Route("/v1/skills/{skill_id}", delete_skill, methods=["DELETE"]),
    Route("/v1/skills/{skill_id}/content", skill_content, methods=["GET"]),
    Route("/v1/skills/{skill_id}/versions", create_version, methods=["POST"]),
    Route("/v1/skills/{skill_id}/versions", list_versions, methods=["GET"]),
    Route("/v1/skills/{skill_id}/versions/{version}", retrieve_version, methods=["GET"]),
    Route("/v1/skills/{skill_id}/versions/{version}", delete_version, methods=["DELETE"]),
    Route("/v1/skills/{skill_id}/versions/{version}/content", version_content, methods=["GET"]),
]
