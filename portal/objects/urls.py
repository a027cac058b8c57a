"""URLs of the administered objects pages (included from portal/urls.py)."""

from django.urls import path

from . import views

urlpatterns = [
    path("objects/", views.objects_page, name="objects"),
    path("objects/add/", views.object_create, name="object_create"),
    path("objects/<int:pk>/", views.object_edit, name="object"),
    path("objects/<int:pk>/delete/", views.object_delete, name="object_delete"),
    path("objects/stores/add/", views.store_create, name="object_store_create"),
    path("objects/stores/<str:name>/delete/", views.store_delete, name="object_store_delete"),
]
